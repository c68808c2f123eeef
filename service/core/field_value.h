// Views of one field of a client update, over memory the caller owns (no copy):
// dense bytes, sparse COO (int64 linear indices + one value each) or row-sparse
// (int64 row ids + one row of `row_width` values each). An UpdateView is a whole
// update: one FieldValue per leaf of the value type, plus the optional weight.
#ifndef FEDAGG_SERVICE_CORE_FIELD_VALUE_H_
#define FEDAGG_SERVICE_CORE_FIELD_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "service/core/dtype.h"
#include "service/core/half_float.h"
#include "service/core/intrinsic.h"

namespace fedagg {

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };

// The bytes of a typed span (std::as_bytes for absl::Span).
template <typename T>
absl::Span<const std::byte> AsBytes(absl::Span<const T> values) {
  return absl::MakeConstSpan(reinterpret_cast<const std::byte*>(values.data()),
                             values.size() * sizeof(T));
}

struct FieldValue {
  Encoding encoding = Encoding::kDense;
  DType dtype = DType::kFloat32;
  absl::Span<const int64_t> indices;  // empty for dense
  absl::Span<const std::byte> values;
  // Known to list its indices in ascending order (repeats allowed): set by validation
  // (ValidateAndMarkUpdate), which reads every index anyway, so that the scatter need not
  // read them all again to find out. False: not known.
  bool ascending = false;

  template <typename T>
  static FieldValue Dense(absl::Span<const T> values) {
    return FieldValue{Encoding::kDense, DTypeOf<T>::value, {}, AsBytes(values)};
  }
  template <typename T>
  static FieldValue Sparse(absl::Span<const int64_t> indices, absl::Span<const T> values) {
    return FieldValue{Encoding::kSparse, DTypeOf<T>::value, indices, AsBytes(values)};
  }
  template <typename T>
  static FieldValue RowSparse(absl::Span<const int64_t> row_ids, absl::Span<const T> rows) {
    return FieldValue{Encoding::kRowSparse, DTypeOf<T>::value, row_ids, AsBytes(rows)};
  }
};

struct UpdateView {
  std::vector<FieldValue> fields;  // one per leaf, depth-first
  std::optional<double> weight;    // required iff the spec has a weighted field
  // Differential privacy: the whole update's bound scaled it (update_clipping.h).
  bool clipped = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_FIELD_VALUE_H_
