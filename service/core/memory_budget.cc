// MemoryBudget and MemoryReservation: accounting of the bytes held for client data.
#include "service/core/memory_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fedagg {

MemoryReservation::MemoryReservation(MemoryReservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryReservation::ResizeUnchecked(uint64_t bytes) {
  if (budget_ == nullptr) return;
  if (bytes > bytes_) budget_->Add(bytes - bytes_);
  if (bytes < bytes_) budget_->Subtract(bytes_ - bytes);
  bytes_ = bytes;
}

void MemoryReservation::Release() {
  if (budget_ != nullptr) budget_->Subtract(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<MemoryReservation> MemoryBudget::Reserve(uint64_t bytes, absl::string_view what) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ != 0 && (bytes > limit_ || used > limit_ - bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory budget reached: ", what, " needs ", bytes, " bytes, ", used, " of the ", limit_,
          "-byte budget (--memory_budget_bytes) are held by updates in flight, pending batches, "
          "partials from child aggregators and accumulators; send it again after a backoff, or ask the operator to raise the "
          "budget or add aggregators"));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return MemoryReservation(this, bytes);
}

MemoryReservation MemoryBudget::ReserveUnchecked(uint64_t bytes) {
  Add(bytes);
  return MemoryReservation(this, bytes);
}

}  // namespace fedagg
