// fedagg-server: the aggregation service. Without --parent it is the root (the server
// placement); with --parent it is an intermediate aggregator. Every flag can also come
// from a file: --flagfile=/etc/fedagg/server.flags (one --flag=value per line).
#include <malloc.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <cstdio>
#include <thread>

#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include <atomic>
#include "service/backend/backend_choice.h"
#include "service/server.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "address:port to serve gRPC on (port 0: pick one)");
ABSL_FLAG(std::string, parent, "", "host:port of the parent aggregator; empty: this is the root");
ABSL_FLAG(std::string, node_id, "",
          "this node's name at its parent (default: listen address#port); the parent sees "
          "<node_id>@<start time>, so a restarted node is a new child");
ABSL_FLAG(int, batch_size, 16, "client updates reduced together in one pass");
ABSL_FLAG(int, batch_max_mib, 64,
          "a batch is reduced once its updates hold this many MiB, even if it has fewer than "
          "--batch_size (large models are then reduced a few at a time)");
ABSL_FLAG(int64_t, flush_interval_ms, 100,
          "a batch that has not filled up is reduced once its oldest update waited this long");
ABSL_FLAG(int, retain_finished, 1000,
          "finished aggregations (and their results) kept; older ones are forgotten");
ABSL_FLAG(int64_t, max_update_mib, 1024, "largest accepted client update, MiB");
ABSL_FLAG(int64_t, memory_budget_bytes, 0,
          "bytes of client data (updates being received, pending batches, accumulators) this "
          "node holds at most; a new update that would exceed it is refused with "
          "RESOURCE_EXHAUSTED; 0: no budget");
ABSL_FLAG(int64_t, ingest_window_mib, 16,
          "MiB of client updates held at once, being received or waiting in pending batches; "
          "a new update waits (its stream paused, so gRPC flow control holds the sender back) "
          "until its bytes fit, and an update larger than the window is received alone. "
          "Batches close at half the window. Bounds memory to about the accumulators plus the "
          "window; raise it when many slow senders upload large models at once. 0: no window");
ABSL_FLAG(int64_t, stream_window_kib, 1024,
          "HTTP/2 receive window of each stream, KiB: what a sender may have in flight beyond "
          "what this node has read, so also what each paused stream buffers here; 0: gRPC's "
          "own, which grows with the bandwidth-delay product");
ABSL_FLAG(int, heap_arenas, 1,
          "glibc heap arenas the server's threads share (mallopt M_ARENA_MAX); each arena keeps "
          "memory its threads freed, so fewer arenas hold less (docs/BENCHMARKS.md item 19); "
          "0: glibc's default, 8 per core");
ABSL_FLAG(int, max_streams_per_identity, 0,
          "Contribute and Submit streams one caller (certificate, bearer token, or peer "
          "address) may hold open; more are refused with RESOURCE_EXHAUSTED; 0: no limit");
ABSL_FLAG(absl::Duration, stall_timeout, absl::Seconds(60),
          "an update that receives no message for this long is discarded and its stream "
          "ended with DEADLINE_EXCEEDED (e.g. 30s, 2m); 0: never");
ABSL_FLAG(int64_t, child_grace_ms, 10000,
          "after a seal, how long this node waits for its child aggregators' final partials "
          "(give each tier a longer grace than the tiers below it)");
ABSL_FLAG(int64_t, forward_interval_ms, 1000,
          "intermediate aggregators: how often partial aggregates are forwarded up");
ABSL_FLAG(int64_t, parent_keepalive_ms, 10000,
          "intermediate aggregators: ping the parent after this long without traffic and drop "
          "the connection when a ping is not answered within this long again (at least 1000); "
          "the node then refuses updates with UNAVAILABLE until it has rejoined");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "root only: directory for one checkpoint file per aggregation, resumed after a restart; "
          "enables DURABLE acks (empty: no checkpoints)");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(1),
          "how often aggregations that changed are checkpointed (e.g. 500ms, 2s); a DURABLE ack "
          "waits up to this long");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for the listener (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for the listener");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA that client certificates must chain to (mTLS)");
ABSL_FLAG(std::string, parent_tls_ca, "", "PEM CA that verifies the parent (enables TLS to it)");
ABSL_FLAG(std::string, parent_tls_cert, "", "PEM client certificate for the parent (mTLS)");
ABSL_FLAG(std::string, parent_tls_key, "", "PEM private key for --parent_tls_cert");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "file with one accepted bearer token per line; calls without one get UNAUTHENTICATED");
ABSL_FLAG(std::string, parent_token_file, "", "file holding the bearer token for the parent");
ABSL_FLAG(std::string, metrics_address, std::string(fedagg::kMetricsAddressAuto),
          "host:port serving Prometheus /metrics, /healthz and /readyz over HTTP; 'auto': the "
          "--listen host on a free port (logged at start); empty: off");
ABSL_FLAG(std::string, backend, "auto",
          "reduction backend: auto (cuda when a CUDA device is found, else cpu), cpu, cuda, or "
          "thrust-omp (the CUDA backend's code on the CPU's cores, for checking); docs/GPU.md");
ABSL_FLAG(std::string, devices, "all",
          "devices to reduce on: all (every CUDA device found) or ids such as 0,2; batches go to "
          "them in turn and Serialize / Report sum them with NCCL. With --backend=thrust-omp, the "
          "list's length is a number of simulated devices on the CPU (a test aid); docs/GPU.md");

ABSL_FLAG(std::string, cuda_plugin, "",
          "path of the cuda backend plugin (libfedagg_backend_cuda.so), loaded when --backend=cuda, "
          "or auto on a host whose NVIDIA driver finds a device; empty: the one beside this program");
ABSL_FLAG(int, staging_slots, 4,
          "cuda / thrust-omp: slots of the staging ring that overlaps receiving, copying to the "
          "device and reducing (each --staging_slot_mib of host memory, pinned for cuda, plus as "
          "much device memory; counted in --memory_budget_bytes)");
ABSL_FLAG(int, staging_slot_mib, 64,
          "cuda / thrust-omp: MiB of one staging slot; a batch larger than a slot is staged in parts");

namespace {

absl::StatusOr<std::vector<std::string>> ReadTokens(const std::string& path) {
  std::vector<std::string> tokens;
  if (path.empty()) return tokens;
  absl::StatusOr<std::string> content = fedagg::ReadFile(path);
  if (!content.ok()) return content.status();
  for (absl::string_view line : absl::StrSplit(*content, '\n', absl::SkipWhitespace())) {
    tokens.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return tokens;
}

std::atomic<bool> g_stop{false};

}  // namespace

namespace {
// A flag that must not be negative, as unsigned; nullopt (after saying so) when it is.
std::optional<uint64_t> NonNegativeFlag(const char* name, int64_t value) {
  if (value >= 0) return static_cast<uint64_t>(value);
  std::fprintf(stderr, "fedagg-server: --%s must be >= 0\n", name);
  return std::nullopt;
}
}  // namespace

int main(int argc, char** argv) {
  fedagg::SetProgramUsage(
      "the aggregation tier for federated computation.\n"
      "  root:          fedagg-server --listen=0.0.0.0:50051\n"
      "  intermediate:  fedagg-server --listen=0.0.0.0:50052 --parent=root-host:50051");
  absl::ParseCommandLine(argc, argv);
  // Before any thread starts: threads are given their arena at their first allocation.
  const std::optional<uint64_t> heap_arenas = NonNegativeFlag("heap_arenas", absl::GetFlag(FLAGS_heap_arenas));
  if (!heap_arenas.has_value()) return 2;
  if (*heap_arenas > 0) mallopt(M_ARENA_MAX, static_cast<int>(*heap_arenas));

  absl::StatusOr<fedagg::DeviceSelection> devices = fedagg::ParseDeviceSelection(absl::GetFlag(FLAGS_devices));
  if (!devices.ok()) {
    std::fprintf(stderr, "fedagg-server: %s\n", std::string(devices.status().message()).c_str());
    return 2;
  }
  fedagg::BackendOptions backend_options;
  backend_options.devices = *devices;
  backend_options.cuda_plugin = absl::GetFlag(FLAGS_cuda_plugin);
  backend_options.staging_slots = absl::GetFlag(FLAGS_staging_slots);
  backend_options.staging_slot_bytes = static_cast<uint64_t>(std::max(absl::GetFlag(FLAGS_staging_slot_mib), 0)) << 20;
  absl::StatusOr<fedagg::BackendChoice> backend =
      fedagg::ChooseBackend(absl::GetFlag(FLAGS_backend), backend_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "fedagg-server: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  std::printf("fedagg-server: reduction backend %s\n", backend->reason.c_str());

  fedagg::ServerConfig config;
  config.listen_address = absl::GetFlag(FLAGS_listen);
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.backend = backend->backend;
  config.parent_address = absl::GetFlag(FLAGS_parent);
  config.node_id = absl::GetFlag(FLAGS_node_id);
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.batch_max_bytes = static_cast<uint64_t>(std::max(absl::GetFlag(FLAGS_batch_max_mib), 0)) << 20;
  config.retain_finished = absl::GetFlag(FLAGS_retain_finished);
  config.flush_interval = absl::Milliseconds(absl::GetFlag(FLAGS_flush_interval_ms));
  config.max_update_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_update_mib)) << 20;
  config.child_grace = absl::Milliseconds(absl::GetFlag(FLAGS_child_grace_ms));
  const std::optional<uint64_t> memory_budget_bytes = NonNegativeFlag("memory_budget_bytes", absl::GetFlag(FLAGS_memory_budget_bytes));
  if (!memory_budget_bytes.has_value()) return 2;
  config.memory_budget_bytes = *memory_budget_bytes;
  const std::optional<uint64_t> ingest_window_mib = NonNegativeFlag("ingest_window_mib", absl::GetFlag(FLAGS_ingest_window_mib));
  if (!ingest_window_mib.has_value()) return 2;
  config.ingest_window_bytes = *ingest_window_mib << 20;
  const std::optional<uint64_t> stream_window_kib = NonNegativeFlag("stream_window_kib", absl::GetFlag(FLAGS_stream_window_kib));
  if (!stream_window_kib.has_value()) return 2;
  config.stream_window_bytes = *stream_window_kib << 10;
  config.max_streams_per_identity = absl::GetFlag(FLAGS_max_streams_per_identity);
  config.stall_timeout = absl::GetFlag(FLAGS_stall_timeout);
  config.forward_interval = absl::Milliseconds(absl::GetFlag(FLAGS_forward_interval_ms));
  config.parent_keepalive = absl::Milliseconds(absl::GetFlag(FLAGS_parent_keepalive_ms));
  config.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  config.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  config.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_client_ca)};
  config.parent_tls = {absl::GetFlag(FLAGS_parent_tls_cert), absl::GetFlag(FLAGS_parent_tls_key),
                       absl::GetFlag(FLAGS_parent_tls_ca)};
  absl::StatusOr<std::vector<std::string>> tokens = ReadTokens(absl::GetFlag(FLAGS_auth_tokens_file));
  absl::StatusOr<std::vector<std::string>> parent_token = ReadTokens(absl::GetFlag(FLAGS_parent_token_file));
  if (!tokens.ok() || !parent_token.ok()) {
    std::fprintf(stderr, "fedagg-server: %s\n",
                 (!tokens.ok() ? tokens.status() : parent_token.status()).ToString().c_str());
    return 2;
  }
  config.auth_tokens = *tokens;
  if (!parent_token->empty()) config.parent_token = parent_token->front();

  absl::StatusOr<std::unique_ptr<fedagg::FedaggServer>> server = fedagg::FedaggServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "fedagg-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!config.checkpoint_dir.empty()) {
    std::printf("fedagg-server checkpoints in %s every %s; resumed %d aggregations from it\n",
                config.checkpoint_dir.c_str(), absl::FormatDuration(config.checkpoint_interval).c_str(),
                (*server)->restored_aggregations());
  }
  if ((*server)->metrics_port() != 0) {
    std::printf("fedagg-server metrics on port %d (--metrics_address=%s): /metrics, /healthz, /readyz\n",
                (*server)->metrics_port(), config.metrics_address.c_str());
  }
  std::printf("fedagg-server listening on port %d as %s (backend: %s)\n", (*server)->port(),
              config.parent_address.empty() ? "root" : ("intermediate under " + config.parent_address).c_str(),
              std::string(backend->backend->name()).c_str());
  std::fflush(stdout);

  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::printf("fedagg-server: shutting down\n");
  (*server)->Shutdown(absl::Seconds(2));
  return 0;
}
