// StreamLimiter: caps the update streams (Contribute and Submit) one caller identity may
// hold open at once, so one misbehaving principal cannot take every stream slot of a
// node. A reactor acquires a Slot when its call starts and holds it until the call ends.
// The identity comes from Authenticator::Identify.
#ifndef FEDAGG_SERVICE_RPC_STREAM_LIMITER_H_
#define FEDAGG_SERVICE_RPC_STREAM_LIMITER_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "service/core/mutex.h"

namespace fedagg {

class StreamLimiter {
 public:
  // One open stream of one identity; releases it on destruction.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

   private:
    friend class StreamLimiter;
    Slot(StreamLimiter* limiter, std::string identity) : limiter_(limiter), identity_(std::move(identity)) {}
    void Release();

    StreamLimiter* limiter_ = nullptr;
    std::string identity_;
  };

  // `max_per_identity` 0: no limit.
  explicit StreamLimiter(int max_per_identity) : max_per_identity_(max_per_identity) {}

  // A slot, or RESOURCE_EXHAUSTED when `identity` already holds the maximum.
  absl::StatusOr<Slot> Acquire(const std::string& identity);
  int open_streams(const std::string& identity) const;

 private:
  void Release(const std::string& identity);

  const int max_per_identity_;
  mutable Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_STREAM_LIMITER_H_
