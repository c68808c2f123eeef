// PortableAccumulatorFactory: a backend made of StagedFieldReducers (field_reducer.h)
// fed through a staging ring (staging_ring.h) — the thrust-omp backend (omp_backend.h) and
// the cuda backend (cuda/cuda_backend.h) are two instances. Each accumulator keeps its
// state in the reducer's memory (the GPU, for cuda), stages its batches through the
// backend's ring (ring_field_reducer.h) and adapts it to FieldAccumulator: reducer
// outcomes become absl::Status (device out of memory: RESOURCE_EXHAUSTED); serialized
// partials are checked by the CPU accumulator of the same field; a report's result is
// made on the device, divided as the CPU backend's report divides (field_report.h
// DivisionOf, in the same precision), and copied out into the result itself, with no
// host copy of the state (sparse_sum_sparse's from the copied-back state, by the CPU
// backend's own ReportUnion), so the format and the results are the CPU backend's, to the
// bit (backend_check.cc compares them). A deterministic aggregation's summed float fields
// get the exact accumulator of the CPU backend instead (exact_field_accumulator.h), made by
// the host backend the factory is given: the CPU backend of the process that uses it, so
// that the cuda plugin, which links its own copy of fedagg's core, sums them on the
// server's thread pool and memory, not on a second pool of its own.
#ifndef FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_
#define FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "portable/field_reducer.h"
#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

class PortableAccumulatorFactory final : public AccumulatorFactory {
 public:
  // `host` (the process's CPU backend, which must outlive the factory) makes the exact
  // accumulators and checks serialized partials before they are loaded. `makers` make each
  // field's reducer (one device's, fed through its staging ring, or one over several
  // devices: multi_device_reducer.h); the factory owns `rings`, one per device, which must
  // outlive every reducer made. `device_monitor` (optional, must outlive the factory)
  // reports the devices the reducers run on; null for reducers in host memory. `pinner`
  // (optional) pins the memory updates are received into. `mask_adder` expands secure
  // aggregation's masks where the reducers run (the portable ChaCha20 of
  // thrust_mask_accumulator.h).
  PortableAccumulatorFactory(std::string name, const AccumulatorFactory& host, portable::ReducerMakers makers,
                             std::vector<std::unique_ptr<portable::StagingRing>> rings, MaskAdder mask_adder,
                             const DeviceMonitor* device_monitor = nullptr,
                             std::shared_ptr<HostMemoryPinner> pinner = nullptr)
      : name_(std::move(name)),
        host_(host),
        makers_(std::move(makers)),
        rings_(std::move(rings)),
        mask_adder_(std::move(mask_adder)),
        device_monitor_(device_monitor),
        pinner_(std::move(pinner)) {}

  absl::string_view name() const override { return name_; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override;
  const DeviceMonitor* device_monitor() const override { return device_monitor_; }
  std::vector<const StagingRingStats*> staging_rings() const override;
  std::shared_ptr<HostMemoryPinner> host_memory_pinner() const override { return pinner_; }
  MaskAdder mask_adder() const override { return mask_adder_; }

 private:
  std::string name_;
  const AccumulatorFactory& host_;
  portable::ReducerMakers makers_;
  std::vector<std::unique_ptr<portable::StagingRing>> rings_;
  const MaskAdder mask_adder_;
  const DeviceMonitor* device_monitor_;
  const std::shared_ptr<HostMemoryPinner> pinner_;
};

// The reducer spec of a field (exposed for tests).
portable::ReducerSpec ReducerSpecOf(const FieldSpec& field);

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_
