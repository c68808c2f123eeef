// Validation of client updates against their ReductionSpec.
#include "service/core/update_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/encoded_values.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

template <typename T>
bool AllFinite(absl::Span<const std::byte> bytes) {
  const T* values = reinterpret_cast<const T*>(bytes.data());
  const size_t n = bytes.size() / sizeof(T);
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      finite &= std::isfinite(values[i]);
    } else {
      finite &= IsFinite(values[i]);
    }
  }
  return finite;
}

bool ValuesFinite(DType dtype, absl::Span<const std::byte> bytes) {
  switch (dtype) {
    case DType::kFloat32: return AllFinite<float>(bytes);
    case DType::kFloat64: return AllFinite<double>(bytes);
    case DType::kFloat16: return AllFinite<Float16>(bytes);
    case DType::kBFloat16: return AllFinite<BFloat16>(bytes);
    case DType::kInt32:
    case DType::kInt64: return true;
  }
  return true;
}

// The largest |x| of a value's elements, in float64.
double LargestMagnitude(const FieldValue& value) {
  return cpu::DispatchDType(value.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = reinterpret_cast<const T*>(value.values.data());
    double largest = 0;
    for (size_t i = 0; i < value.values.size() / sizeof(T); ++i) {
      largest = std::max(largest, std::abs(cpu::Widen<double>(x[i])));
    }
    return largest;
  });
}

// What one pass over a value's indices finds: how many lie outside [0, rows), and how
// many are smaller than the one before them. Counting, not stopping at the first, keeps
// the loop free of branches, so the compiler vectorises it (a sparse update's indices
// are the largest part of what validation reads; 64-bit compares need AVX2, hence the
// clones); the error path looks for the first outside index afterwards.
struct IndexScan {
  size_t outside = 0;
  size_t descents = 0;
};

// Whether `index` lies outside [0, rows): one unsigned compare, a negative index wraps to
// beyond any row count.
inline bool Outside(int64_t index, int64_t rows) {
  return static_cast<uint64_t>(index) >= static_cast<uint64_t>(rows);
}

FEDAGG_VECTOR_CLONES IndexScan ScanIndices(absl::Span<const int64_t> indices, int64_t rows) {
  IndexScan scan;
  if (indices.empty()) return scan;
  const int64_t* index = indices.data();
  scan.outside = Outside(index[0], rows);
  for (size_t i = 1; i < indices.size(); ++i) {
    scan.outside += Outside(index[i], rows);
    scan.descents += index[i] < index[i - 1];
  }
  return scan;
}

size_t FirstOutside(absl::Span<const int64_t> indices, int64_t rows) {
  size_t i = 0;
  while (i < indices.size() && !Outside(indices[i], rows)) ++i;
  return i;
}

// A field's quantized or discretized section of `n` values (a dense field's elements, or
// a sparse one's values: one per index, a row's per row id): its size, and (quantized)
// every block's scale finite and >= 0, which keeps every decoded value finite. A
// discretized section's integers are all valid.
absl::Status CheckEncodedValues(const FieldSpec& field, const FieldValue& value, int64_t n) {
  const ValueEncoding& encoding = field.value_encoding;
  // The kernels read a quantized section's float32 scales, and a discretized section's
  // integers, in place.
  const size_t alignment = encoding.quantized() ? sizeof(float) : static_cast<size_t>(encoding.bits / 8);
  if (reinterpret_cast<uintptr_t>(value.values.data()) % alignment != 0) {
    return FieldError(field, absl::StrCat("its encoded values are not aligned to ", alignment, " bytes"));
  }
  if (value.values.size() != encoding.EncodedBytes(n)) {
    return FieldError(field, absl::StrCat("its encoding ", encoding.ToString(), " takes ",
                                          encoding.EncodedBytes(n), " bytes for ", n,
                                          field.encoding == Encoding::kDense ? " elements" : " values",
                                          " (docs/PROTOCOL.md, \"Encoded values\"), got ", value.values.size()));
  }
  if (!encoding.quantized()) return absl::OkStatus();
  const EncodedValues encoded(encoding, value.values, n);
  for (int64_t k = 0; k < encoded.blocks(); ++k) {
    const float scale = encoded.scale(k);
    if (!std::isfinite(scale) || scale < 0) {
      return FieldError(field, absl::StrCat("block ", k, " has scale ", scale,
                                            "; a quantized block's scale must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// ValidateField; with `ascending`, also whether the indices ascend (read in the same pass).
absl::Status CheckField(const ReductionSpec& spec, const FieldSpec& field, const FieldValue& value,
                        bool* ascending) {
  if (value.encoding != field.encoding) {
    return FieldError(field, absl::StrCat("sent ", EncodingName(value.encoding), " but ",
                                          IntrinsicName(field.intrinsic), " takes ",
                                          EncodingName(field.encoding), " values"));
  }
  if (value.dtype != field.type.dtype) {
    return FieldError(field, absl::StrCat("sent dtype ", DTypeName(value.dtype), ", declared ",
                                          DTypeName(field.type.dtype)));
  }
  const bool encoded = field.value_encoding.encoded();
  const size_t element_size = DTypeSize(field.type.dtype);
  if (!encoded && reinterpret_cast<uintptr_t>(value.values.data()) % element_size != 0) {
    return FieldError(field, "values are not aligned to their element size");
  }
  if (field.encoding == Encoding::kDense) {
    if (!value.indices.empty()) return FieldError(field, "a dense value carries no indices");
    if (encoded) return CheckEncodedValues(field, value, field.type.num_elements());
    if (value.values.size() != field.type.num_bytes()) {
      return FieldError(field, absl::StrCat("expected ", field.type.num_elements(), " elements (",
                                            field.type.num_bytes(), " bytes), got ",
                                            value.values.size(), " bytes"));
    }
  } else {
    const char* what = field.encoding == Encoding::kSparse ? "index" : "row id";
    const char* whats = field.encoding == Encoding::kSparse ? "indices" : "row ids";
    const uint64_t row_bytes = static_cast<uint64_t>(field.row_width) * element_size;
    if (encoded) {
      // Bounded so that the section's bit count cannot overflow (Plan's size limit is far below).
      if (field.row_width != 0 &&
          value.indices.size() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 64 / field.row_width)) {
        return FieldError(field, absl::StrCat(value.indices.size(), " ", whats, " are more than any update holds"));
      }
      FEDAGG_RETURN_IF_ERROR(
          CheckEncodedValues(field, value, static_cast<int64_t>(value.indices.size()) * field.row_width));
    } else if (value.values.size() != value.indices.size() * row_bytes) {
      return FieldError(
          field, absl::StrCat(value.indices.size(), " ", whats, " but ",
                              row_bytes == 0 ? 0 : value.values.size() / row_bytes,
                              field.encoding == Encoding::kSparse ? " values" : " rows",
                              " (", value.values.size(), " bytes); send one ",
                              field.encoding == Encoding::kSparse ? "value" : "row", " per ", what));
    }
    const IndexScan scan = ScanIndices(value.indices, field.rows);
    if (scan.outside > 0) {
      const size_t i = FirstOutside(value.indices, field.rows);
      return FieldError(field, absl::StrCat(what, " ", value.indices[i], " at position ", i,
                                            " is out of range [0, ", field.rows, ")"));
    }
    if (ascending != nullptr) *ascending = scan.descents == 0;
    if (encoded) return absl::OkStatus();  // decoded values are finite (their scales are)
  }
  // One pass for either reason: the spec asks, or the field is summed exactly.
  if ((spec.options().require_finite || field.exact_sum) && !ValuesFinite(value.dtype, value.values)) {
    return FieldError(field, spec.options().require_finite
                                 ? "holds NaN or Inf, and this aggregation requires finite values"
                                 : "holds NaN or Inf; a deterministic aggregation sums exactly, which "
                                   "needs finite values");
  }
  return absl::OkStatus();
}

// ValidateUpdate; with `marks` (the same update), each field's FieldValue::ascending set.
absl::Status CheckUpdate(const ReductionSpec& spec, const UpdateView& update, UpdateView* marks) {
  if (update.fields.size() != spec.fields().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update has ", update.fields.size(), " fields but type ", spec.value_type().ToString(),
        " has ", spec.fields().size()));
  }
  if (spec.has_weighted_field()) {
    if (!update.weight.has_value()) {
      return absl::InvalidArgumentError(
          "this aggregation has a weighted field; send a weight with the update");
    }
    const double weight = *update.weight;
    if (!std::isfinite(weight) || weight <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight ", weight, " is invalid: it must be finite and greater than 0"));
    }
    // A float32 accumulator multiplies by the weight in float32: keep it well inside
    // float32's range so weighted values neither overflow nor vanish.
    if (spec.has_float32_weighted_field() && (weight < kMinFloat32Weight || weight > kMaxFloat32Weight)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weight ", weight, " is outside [", kMinFloat32Weight, ", ", kMaxFloat32Weight,
          "], the range a float32-accumulated weighted field supports; rescale the weights "
          "or create the aggregation with float64_accumulation"));
    }
  } else if (update.weight.has_value()) {
    return absl::InvalidArgumentError(
        "this aggregation has no weighted field; send the update without a weight");
  }
  for (size_t i = 0; i < update.fields.size(); ++i) {
    const FieldSpec& field = spec.fields()[i];
    FEDAGG_RETURN_IF_ERROR(CheckField(spec, field, update.fields[i],
                                      marks != nullptr ? &marks->fields[i].ascending : nullptr));
    // An exact sum holds finite numbers: weight times value must not overflow float64 (on
    // the float32 grid the weight range already keeps it far below).
    if (field.exact_sum && IsWeighted(field.intrinsic) && field.accumulation_dtype == DType::kFloat64 &&
        !std::isfinite(LargestMagnitude(update.fields[i]) * *update.weight)) {
      return FieldError(field, absl::StrCat("weight ", *update.weight, " times the field's largest value "
                                            "overflows float64, which a deterministic aggregation "
                                            "cannot sum; rescale the weights or the values"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FieldError(const FieldSpec& field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("field '", field.path, "' (",
                                                 field.type.ToString(), ", ",
                                                 IntrinsicName(field.intrinsic), "): ", problem));
}

absl::Status ValidateField(const ReductionSpec& spec, const FieldSpec& field,
                           const FieldValue& value) {
  return CheckField(spec, field, value, nullptr);
}

absl::Status ValidateUpdate(const ReductionSpec& spec, const UpdateView& update) {
  return CheckUpdate(spec, update, nullptr);
}

absl::Status ValidateAndMarkUpdate(const ReductionSpec& spec, UpdateView& update) {
  return CheckUpdate(spec, update, &update);
}

}  // namespace fedagg
