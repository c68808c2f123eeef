// fedagg-server's ingest flags: how updates are batched and reduced, how large they may be,
// and how much memory the node holds.
#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "service/flags/flag_values.h"
#include "service/flags/server_flags.h"
#include "service/core/ingest_window_size.h"
#include "service/core/machine_resources.h"
#include "service/core/status_macros.h"

ABSL_FLAG(int, batch_size, 16, "client updates reduced together in one pass");
ABSL_FLAG(int, batch_max_mib, 64,
          "a batch is reduced once its updates hold this many MiB, even if it has fewer than "
          "--batch_size (large models are then reduced a few at a time)");
ABSL_FLAG(int64_t, flush_interval_ms, 100,
          "a batch that has not filled up is reduced once its oldest update waited this long");
ABSL_FLAG(int, retain_finished, 1000,
          "finished aggregations (and their results) kept; beyond it those that finished first are "
          "forgotten (never one that finished in the last --finished_grace_s), and sooner, oldest "
          "result first, when their results take more than --retain_finished_mib, or, whatever their "
          "age, when a new aggregation needs the memory a finished one still holds");
ABSL_FLAG(int64_t, retain_finished_mib, 1024,
          "MiB the results of finished aggregations may take together: beyond it the finished "
          "aggregations with the oldest results are forgotten (never the newest result, whatever its "
          "size, nor one made in the last --finished_grace_s); 0: no bound but --retain_finished");
ABSL_FLAG(int64_t, finished_grace_s, 10,
          "seconds a finished aggregation's status and result are kept whatever --retain_finished "
          "and --retain_finished_mib say: its client reads them right after the round");
ABSL_FLAG(int64_t, max_update_mib, 1024, "largest accepted client update, MiB");
ABSL_FLAG(int64_t, memory_budget_bytes, 0,
          "bytes of client data (updates being received, pending batches, accumulators) this "
          "node holds at most; a new update that would exceed it is refused with "
          "RESOURCE_EXHAUSTED; 0: no budget");
ABSL_FLAG(std::string, ingest_window_mib, "auto",
          "MiB of client updates held at once, being received or waiting in pending batches; "
          "a new update waits (its stream paused, so gRPC flow control holds the sender back) "
          "until its bytes fit, and an update larger than the window is received alone. "
          "Batches close at half the window. Bounds memory to about the accumulators plus the "
          "window. auto: 16 MiB per core (of this process's CPUs and cgroup limit), at least 64 "
          "and at most 1024, at most a quarter of --memory_budget_bytes and a sixteenth of the "
          "memory (docs/OPERATIONS.md); 0: no window (nothing then bounds the updates waiting to be reduced)");
ABSL_FLAG(std::string, heap_arenas, "auto",
          "glibc heap arenas the server's threads share (mallopt M_ARENA_MAX); each arena keeps "
          "memory its threads freed, so fewer arenas hold less (docs/BENCHMARKS.md item 19), "
          "but their threads queue on one arena's lock for every allocation (gRPC allocates "
          "several times per message). auto: one per two cores (of this process's CPUs and "
          "cgroup limit), at least 1; 0: glibc's default, 8 per core");

namespace fedagg {

absl::Status ApplyIngestFlags(ServerConfig& config, std::string* ingest_window_reason) {
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.batch_max_bytes = static_cast<uint64_t>(std::max(absl::GetFlag(FLAGS_batch_max_mib), 0)) << 20;
  config.flush_interval = absl::Milliseconds(absl::GetFlag(FLAGS_flush_interval_ms));
  config.retain_finished = absl::GetFlag(FLAGS_retain_finished);
  FEDAGG_ASSIGN_OR_RETURN(const uint64_t retain_finished_mib,
                          NonNegativeFlag("retain_finished_mib", absl::GetFlag(FLAGS_retain_finished_mib)));
  config.retain_finished_bytes = std::min(retain_finished_mib, ~uint64_t{0} >> 20) << 20;
  const int64_t finished_grace_s = absl::GetFlag(FLAGS_finished_grace_s);
  FEDAGG_RETURN_IF_ERROR(NonNegativeFlag("finished_grace_s", finished_grace_s).status());
  config.finished_grace = absl::Seconds(finished_grace_s);
  config.max_update_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_update_mib)) << 20;
  FEDAGG_ASSIGN_OR_RETURN(config.memory_budget_bytes,
                          NonNegativeFlag("memory_budget_bytes", absl::GetFlag(FLAGS_memory_budget_bytes)));
  const std::string window = absl::GetFlag(FLAGS_ingest_window_mib);
  if (window == "auto") {
    const IngestWindowSize size = AutoIngestWindow(ReadMachineResources(), config.memory_budget_bytes);
    config.ingest_window_bytes = size.bytes;
    *ingest_window_reason = size.reason;
    return absl::OkStatus();
  }
  int64_t mib = 0;
  if (!absl::SimpleAtoi(window, &mib)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ingest_window_mib must be auto or a number of MiB, not '", window, "'"));
  }
  FEDAGG_ASSIGN_OR_RETURN(const uint64_t ingest_window_mib, NonNegativeFlag("ingest_window_mib", mib));
  config.ingest_window_bytes = ingest_window_mib << 20;
  *ingest_window_reason = ingest_window_mib == 0 ? "--ingest_window_mib=0: no window" : "--ingest_window_mib";
  return absl::OkStatus();
}

absl::StatusOr<int> HeapArenasFlag() {
  const std::string value = absl::GetFlag(FLAGS_heap_arenas);
  if (value == "auto") return std::max(1, ReadMachineResources().cores / 2);
  int64_t arenas = 0;
  if (!absl::SimpleAtoi(value, &arenas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heap_arenas must be auto or a number of arenas, not '", value, "'"));
  }
  FEDAGG_ASSIGN_OR_RETURN(const uint64_t checked, NonNegativeFlag("heap_arenas", arenas));
  return static_cast<int>(checked);
}

}  // namespace fedagg
