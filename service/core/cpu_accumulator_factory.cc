// Picks the CPU accumulator for a field: by intrinsic family and accumulation dtype (a
// deterministic aggregation's summed float fields: the exact one).
#include "service/core/cpu_accumulator_factory.h"

#include "service/core/cpu_dense_accumulator.h"
#include "service/core/cpu_scatter_accumulator.h"
#include "service/core/cpu_sparse_union_accumulator.h"
#include "service/core/exact_field_accumulator.h"

namespace fedagg {
namespace {

template <typename Acc>
std::unique_ptr<FieldAccumulator> MakeFor(const FieldSpec& field, ThreadPool& pool) {
  if (field.encoding == Encoding::kDense) {
    return std::make_unique<CpuDenseAccumulator<Acc>>(field, pool);
  }
  if (field.intrinsic == Intrinsic::kSparseSumSparse) {
    return std::make_unique<CpuSparseUnionAccumulator<Acc>>(field, pool);
  }
  return std::make_unique<CpuScatterAccumulator<Acc>>(field, pool);
}

}  // namespace

const CpuAccumulatorFactory& CpuAccumulatorFactory::Default() {
  static const CpuAccumulatorFactory* const factory =
      new CpuAccumulatorFactory(ThreadPool::Default());
  return *factory;
}

std::unique_ptr<FieldAccumulator> CpuAccumulatorFactory::Make(const FieldSpec& field) const {
  if (field.exact_sum) return std::make_unique<ExactFieldAccumulator>(field, pool_);
  switch (field.accumulation_dtype) {
    case DType::kFloat64: return MakeFor<double>(field, pool_);
    case DType::kInt64: return MakeFor<int64_t>(field, pool_);
    default: return MakeFor<float>(field, pool_);
  }
}

}  // namespace fedagg
