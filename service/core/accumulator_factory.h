// AccumulatorFactory: a reduction backend, as PartialAggregate sees it — it makes the
// FieldAccumulator of every field. One factory serves every aggregation of a process;
// it must outlive the partial aggregates it made accumulators for. Backends: "cpu"
// (cpu_accumulator_factory.h), "thrust-omp" (thrust/, the portable reduction on the
// CPU's cores through Thrust's OpenMP system) and "cuda" (cuda/, the same reduction on a
// GPU). backend_choice.h picks one for the service.
#ifndef FEDAGG_SERVICE_CORE_ACCUMULATOR_FACTORY_H_
#define FEDAGG_SERVICE_CORE_ACCUMULATOR_FACTORY_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/core/device_monitor.h"
#include "service/core/field_accumulator.h"
#include "service/core/host_memory_pinner.h"
#include "service/core/reduction_spec.h"
#include "service/core/secure_masks.h"
#include "service/core/staging_monitor.h"

namespace fedagg {

class AccumulatorFactory {
 public:
  virtual ~AccumulatorFactory() = default;

  // The backend's name as --backend spells it: "cpu", "thrust-omp", "cuda".
  virtual absl::string_view name() const = 0;
  // A fresh accumulator for `field` (which must outlive it). Cannot fail: a device
  // backend allocates device memory on first use and reports failure from there.
  virtual std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const = 0;
  // The devices this backend reduces on, read at scrape time for the GPU metrics; null
  // (the default) for a backend that reduces in host memory. Lives as long as the factory.
  virtual const DeviceMonitor* device_monitor() const { return nullptr; }
  // The staging rings batches go through on their way to the devices (one per device),
  // read at scrape time for the staging metrics; none (the default) for a backend that
  // reduces straight from the received updates. Live as long as the factory.
  virtual std::vector<const StagingRingStats*> staging_rings() const { return {}; }
  // What pins the host memory updates are received into, so that the backend's copies to
  // its devices read it at full speed (LargeAllocation::KeepReleasedMappings); null (the default)
  // for a backend that needs no pinned memory.
  virtual std::shared_ptr<HostMemoryPinner> host_memory_pinner() const { return nullptr; }
  // Where a secure aggregation's root expands the masks it removes (secure_masks.h): the
  // backend's devices, bit-identical to the host's MaskAccumulator; null (the default)
  // for the host's cores.
  virtual MaskAdder mask_adder() const { return nullptr; }
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_ACCUMULATOR_FACTORY_H_
