// The counting around another pinner's Pin and Unpin.
#include "service/core/measured_host_memory_pinner.h"

#include "absl/time/clock.h"

namespace fedagg {
namespace {

uint64_t NanosecondsSince(absl::Time start) {
  return static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - start));
}

}  // namespace

bool MeasuredHostMemoryPinner::Pin(void* data, size_t bytes) {
  const absl::Time start = absl::Now();
  const bool pinned = pinner_->Pin(data, bytes);
  nanoseconds_.fetch_add(NanosecondsSince(start), std::memory_order_relaxed);
  if (pinned) {
    pins_.fetch_add(1, std::memory_order_relaxed);
    pinned_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    failures_.fetch_add(1, std::memory_order_relaxed);
  }
  return pinned;
}

void MeasuredHostMemoryPinner::Unpin(void* data, size_t bytes) {
  const absl::Time start = absl::Now();
  pinner_->Unpin(data, bytes);
  nanoseconds_.fetch_add(NanosecondsSince(start), std::memory_order_relaxed);
  pinned_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace fedagg
