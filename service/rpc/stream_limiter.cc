// StreamLimiter: per-identity limit on open update streams.
#include "service/rpc/stream_limiter.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fedagg {

StreamLimiter::Slot::Slot(Slot&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)), identity_(std::move(other.identity_)) {}

StreamLimiter::Slot& StreamLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    identity_ = std::move(other.identity_);
  }
  return *this;
}

void StreamLimiter::Slot::Release() {
  if (limiter_ != nullptr) limiter_->Release(identity_);
  limiter_ = nullptr;
}

absl::StatusOr<StreamLimiter::Slot> StreamLimiter::Acquire(const std::string& identity) {
  MutexLock lock(&mu_);
  int& open = open_[identity];
  if (max_per_identity_ > 0 && open >= max_per_identity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        identity, " already has ", open, " update streams open, the most this server allows per "
        "caller (--max_streams_per_identity=", max_per_identity_,
        "); send more updates over an open Contribute stream, or close one first"));
  }
  ++open;
  return Slot(this, identity);
}

int StreamLimiter::open_streams(const std::string& identity) const {
  MutexLock lock(&mu_);
  auto it = open_.find(identity);
  return it == open_.end() ? 0 : it->second;
}

void StreamLimiter::Release(const std::string& identity) {
  MutexLock lock(&mu_);
  auto it = open_.find(identity);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

}  // namespace fedagg
