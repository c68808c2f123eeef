// Picks the CPU accumulator for a field: by intrinsic family and accumulation dtype.
#include "service/core/field_accumulator.h"

#include "service/core/cpu_dense_accumulator.h"
#include "service/core/cpu_scatter_accumulator.h"
#include "service/core/cpu_sparse_union_accumulator.h"

namespace fedagg {
namespace {

template <typename Acc>
std::unique_ptr<FieldAccumulator> MakeFor(const FieldSpec& field, ThreadPool& pool) {
  if (field.encoding == Encoding::kDense) {
    return std::make_unique<CpuDenseAccumulator<Acc>>(field, pool);
  }
  if (field.intrinsic == Intrinsic::kSparseSumSparse) {
    return std::make_unique<CpuSparseUnionAccumulator<Acc>>(field);
  }
  return std::make_unique<CpuScatterAccumulator<Acc>>(field, pool);
}

}  // namespace

std::unique_ptr<FieldAccumulator> MakeCpuFieldAccumulator(const FieldSpec& field,
                                                          ThreadPool& pool) {
  switch (field.accumulation_dtype) {
    case DType::kFloat64: return MakeFor<double>(field, pool);
    case DType::kInt64: return MakeFor<int64_t>(field, pool);
    default: return MakeFor<float>(field, pool);
  }
}

}  // namespace fedagg
