// MemoryBudget: the bytes a fedagg node may hold for client data — updates being
// received, updates waiting in pending batches, partials being received from child
// aggregators, deltas kept for the parent until it holds them, and the accumulators of
// its aggregations —
// and MemoryReservation, the RAII claim on part of it.
//   Reserve          refuses (RESOURCE_EXHAUSTED) a claim that would exceed the budget;
//                    used before a new update's buffer is allocated, so a refused update
//                    holds nothing.
//   ReserveUnchecked records memory that is already committed to accepted work (an
//                    accumulator that grew while reducing acknowledged updates); it may
//                    push the total past the budget, which then refuses new updates.
// A budget of 0 bytes accounts without refusing. Thread-safe; lock-free.
#ifndef FEDAGG_SERVICE_CORE_MEMORY_BUDGET_H_
#define FEDAGG_SERVICE_CORE_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedagg {

class MemoryBudget;

class MemoryReservation {
 public:
  MemoryReservation() = default;  // holds nothing
  MemoryReservation(MemoryReservation&& other) noexcept;
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;
  ~MemoryReservation() { Release(); }

  // Changes the claim to `bytes` without checking the budget (memory already committed).
  // No-op on a reservation that belongs to no budget.
  void ResizeUnchecked(uint64_t bytes);
  uint64_t bytes() const { return bytes_; }

 private:
  friend class MemoryBudget;
  MemoryReservation(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
  void Release();

  MemoryBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

class MemoryBudget {
 public:
  // `limit_bytes` 0: no limit, only accounting.
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Claims `bytes` for `what` (e.g. "an update of 4096 bytes"), or RESOURCE_EXHAUSTED
  // saying the budget, what is held and what to do; nothing is claimed then.
  absl::StatusOr<MemoryReservation> Reserve(uint64_t bytes, absl::string_view what);
  MemoryReservation ReserveUnchecked(uint64_t bytes);

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  friend class MemoryReservation;
  void Add(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void Subtract(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_MEMORY_BUDGET_H_
