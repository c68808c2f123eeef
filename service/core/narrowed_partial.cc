// 16-bit partials: narrowing a field's sums for the push up, widening them at the parent.
#include "service/core/narrowed_partial.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/half_float.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

template <typename Half>
Half Narrow(double x) {
  if constexpr (std::is_same_v<Half, Float16>) {
    return ToFloat16(static_cast<float>(x));
  } else {
    return ToBFloat16(static_cast<float>(x));
  }
}

// The field's state as written in full: one array of its accumulation dtype.
template <typename Acc>
absl::StatusOr<std::vector<Acc>> FullState(const FieldSpec& field, const FieldAccumulator& accumulator) {
  ByteWriter full;
  FEDAGG_RETURN_IF_ERROR(accumulator.SerializeTo(full));
  const std::string bytes = full.Take();
  ByteReader in(bytes);
  std::vector<Acc> values;
  FEDAGG_RETURN_IF_ERROR(in.GetArray(&values));
  if (!in.AtEnd() || values.size() != static_cast<size_t>(field.type.num_elements())) {
    return absl::InternalError(absl::StrCat("field '", field.path, "': its state is not one array of its elements"));
  }
  return values;
}

template <typename Acc, typename Half>
absl::Status WriteHalf(const FieldSpec& field, const FieldAccumulator& accumulator, DType half, ByteWriter& out) {
  FEDAGG_ASSIGN_OR_RETURN(const std::vector<Acc> values, FullState<Acc>(field, accumulator));
  std::vector<Half> narrowed(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    narrowed[i] = Narrow<Half>(values[i]);
    if (std::isfinite(values[i]) && !IsFinite(narrowed[i])) {  // beyond float16's range: keep it all
      out.Put<uint8_t>(static_cast<uint8_t>(field.accumulation_dtype));
      out.PutArray(values.data(), values.size());
      return absl::OkStatus();
    }
  }
  out.Put<uint8_t>(static_cast<uint8_t>(half));
  out.PutArray(reinterpret_cast<const uint16_t*>(narrowed.data()), narrowed.size());
  return absl::OkStatus();
}

template <typename Acc>
absl::Status ReadHalf(const FieldSpec& field, FieldAccumulator& accumulator, DType half, ByteReader& in,
                      int64_t contributions) {
  std::vector<uint16_t> bits;
  FEDAGG_RETURN_IF_ERROR(in.GetArray(&bits));
  if (bits.size() != static_cast<size_t>(field.type.num_elements())) {
    return absl::DataLossError(absl::StrCat("partial aggregate: field '", field.path, "' holds ", bits.size(),
                                            " 16-bit sums, the field has ", field.type.num_elements()));
  }
  std::vector<Acc> widened(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    widened[i] = static_cast<Acc>(half == DType::kFloat16 ? ToFloat(Float16{bits[i]}) : ToFloat(BFloat16{bits[i]}));
  }
  ByteWriter full;
  full.PutArray(widened.data(), widened.size());
  const std::string bytes = full.Take();
  ByteReader widened_in(bytes);
  return accumulator.DeserializeFrom(widened_in, contributions);
}

template <typename Fn>
absl::Status WithAccumulationType(const FieldSpec& field, Fn&& fn) {
  if (field.accumulation_dtype == DType::kFloat64) return fn(double{});
  return fn(float{});
}

}  // namespace

bool Narrowable(const FieldSpec& field) {
  return field.encoding == Encoding::kDense && !field.exact_sum && IsFloating(field.accumulation_dtype) &&
         (field.intrinsic == Intrinsic::kFederatedSum || field.intrinsic == Intrinsic::kFederatedMean ||
          field.intrinsic == Intrinsic::kFederatedWeightedMean);
}

absl::Status WriteNarrowable(const FieldSpec& field, const FieldAccumulator& accumulator,
                             PartialPrecision precision, ByteWriter& out) {
  if (precision == PartialPrecision::kFull) {
    out.Put<uint8_t>(static_cast<uint8_t>(field.accumulation_dtype));
    return accumulator.SerializeTo(out);
  }
  return WithAccumulationType(field, [&](auto acc) {
    using Acc = decltype(acc);
    return precision == PartialPrecision::kFloat16
               ? WriteHalf<Acc, Float16>(field, accumulator, DType::kFloat16, out)
               : WriteHalf<Acc, BFloat16>(field, accumulator, DType::kBFloat16, out);
  });
}

absl::Status ReadNarrowable(const FieldSpec& field, FieldAccumulator& accumulator, ByteReader& in,
                            int64_t contributions) {
  uint8_t dtype = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&dtype));
  if (dtype == static_cast<uint8_t>(field.accumulation_dtype)) return accumulator.DeserializeFrom(in, contributions);
  if (dtype != static_cast<uint8_t>(DType::kFloat16) && dtype != static_cast<uint8_t>(DType::kBFloat16)) {
    return absl::DataLossError(absl::StrCat("partial aggregate: field '", field.path, "' travels in dtype ",
                                            static_cast<int>(dtype), ", neither its accumulation dtype ",
                                            DTypeName(field.accumulation_dtype), " nor float16 or bfloat16"));
  }
  return WithAccumulationType(field, [&](auto acc) {
    return ReadHalf<decltype(acc)>(field, accumulator, static_cast<DType>(dtype), in, contributions);
  });
}

absl::StatusOr<PartialPrecision> ParsePartialPrecision(absl::string_view name) {
  if (name == "float32") return PartialPrecision::kFull;
  if (name == "float16") return PartialPrecision::kFloat16;
  if (name == "bfloat16") return PartialPrecision::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("partial dtype '", name, "' is not float32, float16 or bfloat16"));
}

DType PartialPrecisionDType(PartialPrecision precision) {
  switch (precision) {
    case PartialPrecision::kFloat16: return DType::kFloat16;
    case PartialPrecision::kBFloat16: return DType::kBFloat16;
    case PartialPrecision::kFull: break;
  }
  return DType::kFloat32;
}

PartialPrecision PartialPrecisionOf(DType dtype) {
  if (dtype == DType::kFloat16) return PartialPrecision::kFloat16;
  if (dtype == DType::kBFloat16) return PartialPrecision::kBFloat16;
  return PartialPrecision::kFull;
}

}  // namespace fedagg
