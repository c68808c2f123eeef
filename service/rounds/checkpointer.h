// Checkpointer: makes a root aggregator's aggregations survive a crash. With
// --checkpoint_dir it writes one checkpoint file per aggregation (checkpoint_file.h):
// the first when the aggregation is created, then every --checkpoint_interval for each
// aggregation that changed, and removes the file when the registry forgets a finished
// aggregation. After each write, the DURABLE acks waiting for it are released. On start,
// RestoreAll resumes every aggregation from its file; a file that cannot be read is
// refused (reported, renamed NAME.refused, not resumed). docs/RELIABILITY.md, "Durability".
#ifndef FEDAGG_SERVICE_ROUNDS_CHECKPOINTER_H_
#define FEDAGG_SERVICE_ROUNDS_CHECKPOINTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/core/mutex.h"
#include "service/rounds/aggregation_registry.h"

namespace fedagg {

struct CheckpointerOptions {
  std::string dir;
  absl::Duration interval = absl::Seconds(1);
  // Called after each attempt to write a changed aggregation (metrics).
  std::function<void(absl::Duration, bool ok)> on_written;
};

class Checkpointer final : public AggregationStore {
 public:
  // Creates `dir` when missing. FAILED_PRECONDITION when it is not a writable directory.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Open(CheckpointerOptions options,
                                                            AggregationRegistry& registry);
  ~Checkpointer() override;  // Stop()

  // Before serving: adds every aggregation with a checkpoint in the directory to the
  // registry. Returns how many were resumed; refused files are reported on stderr.
  // FAILED_PRECONDITION when the directory cannot be listed.
  absl::StatusOr<int> RestoreAll();
  // Starts writing every interval.
  void Start();
  // A last pass, then no more checkpoints: acks still waiting go out as RECEIVED, and
  // creating an aggregation fails with UNAVAILABLE. Idempotent.
  void Stop();
  // One pass: writes every aggregation changed since its last checkpoint. Errors are
  // reported on stderr and retried next pass (the acks waiting for them keep waiting).
  void CheckpointAll();

  absl::Status Created(Aggregation& aggregation) override;
  void Forgotten(const std::string& id) override;

 private:
  Checkpointer(CheckpointerOptions options, AggregationRegistry& registry)
      : options_(std::move(options)), registry_(registry) {}
  absl::Status Write(Aggregation& aggregation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Whether `aggregation` is the one whose file `id`.ckpt is (not forgotten meanwhile).
  bool IsLive(const Aggregation& aggregation) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveFile(const std::string& id);
  void Loop();

  const CheckpointerOptions options_;
  AggregationRegistry& registry_;
  // Serializes file writes, one aggregation at a time (held for a whole write; never
  // while taking the registry's lock).
  Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Short: which aggregation owns each file. Forgotten takes it under the registry's lock.
  Mutex mu_;
  std::map<std::string, const Aggregation*> live_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Mutex loop_mu_;
  bool stopping_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread thread_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CHECKPOINTER_H_
