// MeasuredHostMemoryPinner: a HostMemoryPinner that counts what another one does — the
// mappings it pinned and failed to pin, the bytes pinned now, and the seconds spent
// pinning and unpinning — for the server's metrics. Pinning (cudaHostRegister with the
// cuda backend) runs on the thread that maps an update's buffer, a gRPC thread, and costs
// in proportion to the bytes; once the mapping cache is warm no update pays for it, which
// these counters show (docs/OPERATIONS.md, "Metrics").
#ifndef FEDAGG_SERVICE_CORE_MEASURED_HOST_MEMORY_PINNER_H_
#define FEDAGG_SERVICE_CORE_MEASURED_HOST_MEMORY_PINNER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "service/core/host_memory_pinner.h"

namespace fedagg {

class MeasuredHostMemoryPinner final : public HostMemoryPinner {
 public:
  explicit MeasuredHostMemoryPinner(std::shared_ptr<HostMemoryPinner> pinner) : pinner_(std::move(pinner)) {}

  bool Pin(void* data, size_t bytes) override;
  void Unpin(void* data, size_t bytes) override;

  uint64_t pins() const { return pins_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  uint64_t pinned_bytes() const { return pinned_bytes_.load(std::memory_order_relaxed); }
  double seconds() const { return static_cast<double>(nanoseconds_.load(std::memory_order_relaxed)) * 1e-9; }

 private:
  const std::shared_ptr<HostMemoryPinner> pinner_;
  std::atomic<uint64_t> pins_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> pinned_bytes_{0};
  std::atomic<uint64_t> nanoseconds_{0};
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_MEASURED_HOST_MEMORY_PINNER_H_
