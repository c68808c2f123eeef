// Owned result tensors: element access widened to double; the bytes a result holds.
#include "service/core/aggregate_result.h"

#include "service/core/half_float.h"

namespace fedagg {

double Tensor::ValueAsDouble(size_t i) const {
  switch (dtype) {
    case DType::kFloat32: return values<float>()[i];
    case DType::kFloat64: return values<double>()[i];
    case DType::kInt32: return values<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(values<int64_t>()[i]);
    case DType::kFloat16: return ToFloat(values<Float16>()[i]);
    case DType::kBFloat16: return ToFloat(values<BFloat16>()[i]);
  }
  return 0;
}

uint64_t AggregateResult::MemoryBytes() const {
  uint64_t bytes = 0;
  for (const ReportedField& field : fields) {
    bytes += field.value.bytes.size() + (field.indices.size() + field.counts.size()) * sizeof(int64_t);
  }
  return bytes;
}

}  // namespace fedagg
