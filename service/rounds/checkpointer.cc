// Checkpointer: periodic checkpoints, restore at start, removal of forgotten ones.
#include "service/rounds/checkpointer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace fedagg {

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Open(CheckpointerOptions options,
                                                                 AggregationRegistry& registry) {
  if (options.dir.empty()) return absl::InvalidArgumentError("--checkpoint_dir is empty");
  if (options.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--checkpoint_interval must be positive");
  }
  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error || !std::filesystem::is_directory(options.dir) || ::access(options.dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--checkpoint_dir '", options.dir, "' is not a writable directory",
        error ? absl::StrCat(" (", error.message(), ")") : ""));
  }
  return std::unique_ptr<Checkpointer>(new Checkpointer(std::move(options), registry));
}

Checkpointer::~Checkpointer() { Stop(); }

absl::StatusOr<int> Checkpointer::RestoreAll() {
  std::vector<std::string> files;
  std::error_code error;
  std::filesystem::directory_iterator it(options_.dir, error), end;
  for (; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code ignored;
    if (absl::EndsWith(name, ".tmp")) {
      // A write cut short by a crash; the file it was replacing is intact.
      std::filesystem::remove(it->path(), ignored);
    } else if (it->is_regular_file(ignored) && absl::EndsWith(name, kCheckpointSuffix)) {
      files.push_back(name);
    }
  }
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("cannot list --checkpoint_dir '", options_.dir,
                                                      "': ", error.message()));
  }
  std::sort(files.begin(), files.end());
  int restored = 0;
  for (const std::string& name : files) {
    const std::string path = absl::StrCat(options_.dir, "/", name);
    absl::Status status = [&]() -> absl::Status {
      FEDAGG_ASSIGN_OR_RETURN(AggregationCheckpoint checkpoint, ReadCheckpointFile(path));
      if (CheckpointFileName(checkpoint.spec.aggregation_id()) != name) {
        return absl::DataLossError(absl::StrCat(path, " holds aggregation '",
                                                checkpoint.spec.aggregation_id(), "', not the one it is named for"));
      }
      AggregationOptions options = registry_.options();
      options.checkpointed = true;
      FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<Aggregation> aggregation, Aggregation::Restore(checkpoint, options));
      FEDAGG_RETURN_IF_ERROR(registry_.Adopt(aggregation));
      MutexLock lock(&mu_);
      live_[aggregation->id()] = aggregation.get();
      return absl::OkStatus();
    }();
    if (status.ok()) {
      ++restored;
      continue;
    }
    // Never resume from garbage: keep the file for an operator to inspect, out of the way.
    const std::string refused = absl::StrCat(path, ".refused");
    std::error_code error;
    std::filesystem::rename(path, refused, error);
    std::fprintf(stderr, "fedagg-server: checkpoint %s refused, its aggregation is not resumed: %s%s\n",
                 path.c_str(), status.ToString().c_str(),
                 error ? absl::StrCat(" (and it could not be renamed: ", error.message(), ")").c_str()
                       : absl::StrCat(" (kept as ", refused, ")").c_str());
  }
  return restored;
}

void Checkpointer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Checkpointer::Loop() {
  while (true) {
    {
      MutexLock lock(&loop_mu_);
      if (loop_mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; },
                                    options_.interval)) {
        return;
      }
    }
    CheckpointAll();
  }
}

void Checkpointer::Stop() {
  {
    MutexLock lock(&loop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  CheckpointAll();
  {
    MutexLock lock(&mu_);
    stopped_ = true;
  }
  for (const std::shared_ptr<Aggregation>& aggregation : registry_.List()) aggregation->StopDurability();
}

bool Checkpointer::IsLive(const Aggregation& aggregation) {
  MutexLock lock(&mu_);
  auto it = live_.find(aggregation.id());
  return !stopped_ && it != live_.end() && it->second == &aggregation;
}

void Checkpointer::CheckpointAll() {
  for (const std::shared_ptr<Aggregation>& aggregation : registry_.List()) {
    if (!aggregation->checkpointed()) continue;
    MutexLock lock(&write_mu_);
    if (!IsLive(*aggregation)) continue;  // forgotten since List()
    if (absl::Status written = Write(*aggregation); !written.ok()) {
      std::fprintf(stderr, "fedagg-server: checkpoint of aggregation '%s' not written (retried next pass): %s\n",
                   aggregation->id().c_str(), written.ToString().c_str());
    }
    // Forgotten while it was written: the file just renamed into place must go too. (The
    // id cannot belong to a new aggregation yet: Created waits for write_mu_.)
    if (!IsLive(*aggregation)) {
      MutexLock state(&mu_);
      if (!live_.contains(aggregation->id())) RemoveFile(aggregation->id());
    }
  }
}

absl::Status Checkpointer::Write(Aggregation& aggregation) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = aggregation.TakeSnapshot();
  // A snapshot that could not be taken is a failed write: nothing goes to disk.
  if (!snapshot.ok()) {
    if (options_.on_written) options_.on_written(absl::Now() - start, false);
    return snapshot.status();
  }
  if (!snapshot->has_value()) return absl::OkStatus();  // unchanged since the last one
  absl::Status written = WriteFileAtomically(options_.dir, CheckpointFileName(aggregation.id()),
                                             EncodeCheckpoint((*snapshot)->checkpoint));
  if (options_.on_written) options_.on_written(absl::Now() - start, written.ok());
  if (!written.ok()) return written;
  aggregation.MarkDurable(**snapshot);
  return absl::OkStatus();
}

absl::Status Checkpointer::Created(Aggregation& aggregation) {
  MutexLock lock(&write_mu_);
  {
    MutexLock state(&mu_);
    if (stopped_) {
      return absl::UnavailableError("this server is shutting down and writes no more checkpoints; "
                                    "create the aggregation once it is back");
    }
  }
  absl::Status written = Write(aggregation);
  if (!written.ok()) {
    return absl::UnavailableError(absl::StrCat("the aggregation was not created: its first checkpoint "
                                               "could not be written: ", written.message()));
  }
  MutexLock state(&mu_);
  live_[aggregation.id()] = &aggregation;
  return absl::OkStatus();
}

void Checkpointer::Forgotten(const std::string& id) {
  MutexLock lock(&mu_);
  live_.erase(id);
  RemoveFile(id);
}

void Checkpointer::RemoveFile(const std::string& id) {
  std::error_code error;
  const std::string path = absl::StrCat(options_.dir, "/", CheckpointFileName(id));
  if (!std::filesystem::remove(path, error) && error) {
    std::fprintf(stderr, "fedagg-server: cannot remove the checkpoint %s of a forgotten aggregation: %s\n",
                 path.c_str(), error.message().c_str());
  }
}

}  // namespace fedagg
