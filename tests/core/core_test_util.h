// Helpers shared by the tests of the aggregation core: status assertions, spec builders,
// client updates that own their memory (UpdateView only points into it), typed value
// lists written as doubles, and a snapshot of a partial aggregate for "nothing changed".
#ifndef FEDAGG_TESTS_CORE_CORE_TEST_UTIL_H_
#define FEDAGG_TESTS_CORE_CORE_TEST_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "service/core/aggregate_result.h"
#include "service/core/dtype.h"
#include "service/core/field_value.h"
#include "service/core/half_float.h"
#include "service/core/intrinsic.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reduction_spec.h"
#include "service/core/value_type.h"

namespace fedagg::testing {

// ---- Status assertions -------------------------------------------------------------

inline ::testing::AssertionResult IsOk(const absl::Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected OK, got " << status;
}
template <typename T>
::testing::AssertionResult IsOk(const absl::StatusOr<T>& status_or) {
  return IsOk(status_or.status());
}

// The status has `code` and its message contains `substring`.
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           absl::string_view substring) {
  if (status.code() == code && absl::StrContains(status.message(), substring)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << status << "; expected code " << absl::StatusCodeToString(code)
         << " with a message containing '" << substring << "'";
}
template <typename T>
::testing::AssertionResult StatusIs(const absl::StatusOr<T>& status_or, absl::StatusCode code,
                                    absl::string_view substring) {
  return StatusIs(status_or.status(), code, substring);
}

// The value of a StatusOr the test cannot go on without; aborts the binary otherwise.
template <typename T>
T ValueOrDie(absl::StatusOr<T> status_or) {
  if (!status_or.ok()) {
    std::fprintf(stderr, "unexpected error: %s\n", status_or.status().ToString().c_str());
    std::abort();
  }
  return *std::move(status_or);
}

// ---- Specs --------------------------------------------------------------------------

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// A tensor's type, short so that specs written in tests read as their shapes.
inline ValueType T(DType dtype, std::vector<int64_t> shape) { return ValueType::Tensor(dtype, std::move(shape)); }

inline std::shared_ptr<const ReductionSpec> MakeSpec(ValueType type,
                                                     std::vector<FieldIntrinsic> intrinsics,
                                                     ReductionOptions options = {}) {
  return ValueOrDie(ReductionSpec::Create(std::move(type), std::move(intrinsics), options));
}

// A spec whose value type is a single tensor.
inline std::shared_ptr<const ReductionSpec> OneFieldSpec(DType dtype, std::vector<int64_t> shape,
                                                         Intrinsic intrinsic,
                                                         bool report_counts = false,
                                                         ReductionOptions options = {}) {
  return MakeSpec(ValueType::Tensor(dtype, std::move(shape)), {{intrinsic, report_counts}},
                  options);
}

// ---- Typed values -------------------------------------------------------------------

// A C++ value of transport type T from a double (float16 / bfloat16 round to nearest).
template <typename T>
T FromDouble(double x) {
  if constexpr (std::is_same_v<T, Float16>) {
    return ToFloat16(static_cast<float>(x));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return ToBFloat16(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

template <typename T>
std::vector<T> Values(std::initializer_list<double> xs) {
  std::vector<T> out;
  for (double x : xs) out.push_back(FromDouble<T>(x));
  return out;
}

template <typename T>
std::vector<std::byte> ToBytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// ---- Updates that own their memory --------------------------------------------------

// A client update: fields are added in depth-first order. Move-only, because the view
// points into the buffers it owns (moving a std::vector keeps its buffer in place).
class Update {
 public:
  Update() = default;
  Update(Update&&) = default;
  Update& operator=(Update&&) = default;
  Update(const Update&) = delete;
  Update& operator=(const Update&) = delete;

  // Any field, spelled out; lets error tests send inconsistent labels.
  Update& Raw(Encoding encoding, DType dtype, std::vector<int64_t> indices,
              std::vector<std::byte> bytes) {
    indices_.push_back(std::make_unique<std::vector<int64_t>>(std::move(indices)));
    bytes_.push_back(std::make_unique<std::vector<std::byte>>(std::move(bytes)));
    view_.fields.push_back(FieldValue{encoding, dtype, absl::MakeConstSpan(*indices_.back()),
                                      absl::MakeConstSpan(*bytes_.back())});
    return *this;
  }
  template <typename T>
  Update& Dense(const std::vector<T>& values) {
    return Raw(Encoding::kDense, DTypeOf<T>::value, {}, ToBytes(values));
  }
  template <typename T>
  Update& Sparse(std::vector<int64_t> indices, const std::vector<T>& values) {
    return Raw(Encoding::kSparse, DTypeOf<T>::value, std::move(indices), ToBytes(values));
  }
  template <typename T>
  Update& RowSparse(std::vector<int64_t> row_ids, const std::vector<T>& rows) {
    return Raw(Encoding::kRowSparse, DTypeOf<T>::value, std::move(row_ids), ToBytes(rows));
  }
  Update& Weight(double weight) {
    view_.weight = weight;
    return *this;
  }

  const UpdateView& view() const { return view_; }

 private:
  std::vector<std::unique_ptr<std::vector<int64_t>>> indices_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> bytes_;
  UpdateView view_;
};

inline std::vector<UpdateView> Views(const std::vector<Update>& updates) {
  std::vector<UpdateView> views;
  for (const Update& update : updates) views.push_back(update.view());
  return views;
}

// ---- Results ------------------------------------------------------------------------

inline size_t NumElements(const Tensor& tensor) {
  return tensor.bytes.size() / DTypeSize(tensor.dtype);
}

inline std::vector<double> AsDoubles(const Tensor& tensor) {
  std::vector<double> out;
  for (size_t i = 0; i < NumElements(tensor); ++i) out.push_back(tensor.ValueAsDouble(i));
  return out;
}

// Element-wise equality of two tensors, NaN equal to NaN; int64 compared exactly.
inline ::testing::AssertionResult SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype) {
    return ::testing::AssertionFailure()
           << "dtypes differ: " << DTypeName(a.dtype) << " vs " << DTypeName(b.dtype);
  }
  if (a.shape != b.shape) return ::testing::AssertionFailure() << "shapes differ";
  if (a.bytes.size() != b.bytes.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < NumElements(a); ++i) {
    if (a.dtype == DType::kInt64) {
      if (a.values<int64_t>()[i] != b.values<int64_t>()[i]) {
        return ::testing::AssertionFailure() << "element " << i << ": " << a.values<int64_t>()[i]
                                             << " vs " << b.values<int64_t>()[i];
      }
      continue;
    }
    const double x = a.ValueAsDouble(i), y = b.ValueAsDouble(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x != y) return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}

// ---- "Nothing changed" --------------------------------------------------------------

struct Snapshot {
  int64_t contributions;
  double weight_sum;
  std::string bytes;
};

inline Snapshot TakeSnapshot(const PartialAggregate& partial) {
  return Snapshot{partial.contributions(), partial.weight_sum(), partial.Serialize().value()};
}

inline ::testing::AssertionResult Unchanged(const PartialAggregate& partial,
                                            const Snapshot& before) {
  if (partial.contributions() != before.contributions) {
    return ::testing::AssertionFailure() << "contributions changed from " << before.contributions
                                         << " to " << partial.contributions();
  }
  if (partial.weight_sum() != before.weight_sum) {
    return ::testing::AssertionFailure() << "weight sum changed from " << before.weight_sum
                                         << " to " << partial.weight_sum();
  }
  if (partial.Serialize().value() != before.bytes) {
    return ::testing::AssertionFailure() << "serialized state changed";
  }
  return ::testing::AssertionSuccess();
}

// Every dtype, and the floating ones.
inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                                       DType::kInt64,   DType::kFloat16, DType::kBFloat16};
inline constexpr DType kFloatDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                         DType::kBFloat16};
inline constexpr Intrinsic kAllIntrinsics[] = {
    Intrinsic::kFederatedSum,    Intrinsic::kFederatedMean, Intrinsic::kFederatedWeightedMean,
    Intrinsic::kFederatedMax,    Intrinsic::kFederatedMin,  Intrinsic::kSparseSum,
    Intrinsic::kSparseSumSparse, Intrinsic::kSparseMean,    Intrinsic::kSparseWeightedMean,
    Intrinsic::kRowSparseSum,    Intrinsic::kRowSparseMean,
};

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_CORE_CORE_TEST_UTIL_H_
