// The CPU backend's AccumulatorFactory: picks the CPU accumulator for a field by
// intrinsic family and accumulation dtype; large batches are split across a ThreadPool.
#ifndef FEDAGG_SERVICE_CORE_CPU_ACCUMULATOR_FACTORY_H_
#define FEDAGG_SERVICE_CORE_CPU_ACCUMULATOR_FACTORY_H_

#include "service/core/accumulator_factory.h"
#include "service/core/thread_pool.h"

namespace fedagg {

class CpuAccumulatorFactory final : public AccumulatorFactory {
 public:
  explicit CpuAccumulatorFactory(ThreadPool& pool) : pool_(pool) {}

  // The process-wide CPU backend over ThreadPool::Default().
  static const CpuAccumulatorFactory& Default();

  absl::string_view name() const override { return "cpu"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override;

 private:
  ThreadPool& pool_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_ACCUMULATOR_FACTORY_H_
