// PushStream<T>: a server-streaming reactor fed from other threads — Control's
// WatchAggregation (status changes) and Tier's Join (commands to a child aggregator).
// Push() queues a message, one write is in flight at a time; Close() finishes after the
// queue drains. The reactor keeps itself alive until gRPC calls OnDone, and producers
// hold only a weak_ptr, so a late Push after the client left is a harmless no-op.
#ifndef FEDAGG_SERVICE_RPC_PUSH_STREAM_H_
#define FEDAGG_SERVICE_RPC_PUSH_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "service/core/mutex.h"

namespace fedagg {

template <typename T>
class PushStream final : public grpc::ServerWriteReactor<T> {
 public:
  static std::shared_ptr<PushStream> Create() {
    std::shared_ptr<PushStream> stream(new PushStream());
    stream->self_ = stream;
    return stream;
  }

  // `on_done` runs once when the call is over (client gone, or after Close).
  void SetOnDone(std::function<void()> on_done) {
    MutexLock lock(&mu_);
    on_done_ = std::move(on_done);
  }

  void Push(T message) {
    MutexLock lock(&mu_);
    if (closing_.has_value() || finished_) return;
    queue_.push_back(std::move(message));
    WriteNextLocked();
  }

  void Close(grpc::Status status) {
    MutexLock lock(&mu_);
    if (!closing_.has_value()) closing_ = std::move(status);
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      queue_.clear();
      if (!closing_.has_value()) closing_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    WriteNextLocked();
  }

  void OnCancel() override { Close(grpc::Status(grpc::StatusCode::CANCELLED, "client went away")); }

  void OnDone() override {
    std::function<void()> on_done;
    {
      MutexLock lock(&mu_);
      finished_ = true;
      on_done = std::move(on_done_);
    }
    if (on_done) on_done();
    self_.reset();  // may delete this
  }

 private:
  PushStream() = default;

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finish_called_) return;
    if (!queue_.empty()) {
      writing_ = true;
      this->StartWrite(&queue_.front());
    } else if (closing_.has_value()) {
      finish_called_ = true;
      this->Finish(*closing_);
    }
  }

  Mutex mu_;
  std::deque<T> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> closing_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_done_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<PushStream> self_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_PUSH_STREAM_H_
