// What Report() returns: the reduced value of every field, owned, with the number of
// contributions and total weight it contains. Sparse results (sparse_sum_sparse) carry
// their sorted linear indices; counts are present where the spec asked for them.
#ifndef FEDAGG_SERVICE_CORE_AGGREGATE_RESULT_H_
#define FEDAGG_SERVICE_CORE_AGGREGATE_RESULT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "service/core/dtype.h"
#include "service/core/intrinsic.h"
#include "service/core/privacy_spec.h"

namespace fedagg {

// An owned dense tensor.
struct Tensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  template <typename T>
  absl::Span<const T> values() const {
    return absl::MakeConstSpan(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
  }
  template <typename T>
  absl::Span<T> mutable_values() {
    return absl::MakeSpan(reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T));
  }
  // Reads element i widened to double, whatever the dtype (for checks and printing).
  double ValueAsDouble(size_t i) const;
};

struct ReportedField {
  std::string path;
  Intrinsic intrinsic;
  // Dense intrinsics and the dense-result sparse family: the field's shape.
  // sparse_sum_sparse: a vector of nnz values, one per entry of `indices`.
  Tensor value;
  std::vector<int64_t> indices;  // sparse_sum_sparse only: sorted, unique linear indices
  // When the spec asked for counts: per coordinate (sparse), per row (row-sparse),
  // or per entry of `indices` (sparse_sum_sparse). Empty otherwise.
  std::vector<int64_t> counts;
  // The spec asked for counts. Says what `counts` alone cannot: a sparse_sum_sparse result
  // with no entry has counts, none of them.
  bool has_counts = false;

  // Whether the result lists its coordinates in `indices` (sparse_sum_sparse; maybe none).
  bool has_indices() const { return intrinsic == Intrinsic::kSparseSumSparse; }
};

struct AggregateResult {
  int64_t contributions = 0;
  double weight_sum = 0;
  std::vector<ReportedField> fields;
  // A differentially private aggregation's, once noised (privacy_noise.h).
  std::optional<PrivacyReport> privacy;

  // The bytes its fields' values, indices and counts take.
  uint64_t MemoryBytes() const;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_AGGREGATE_RESULT_H_
