// 16-bit partials: narrowing a field's sums for the push up, widening them at the parent.
#include "service/core/narrowed_partial.h"

#include <cmath>
#include <cstring>
#include <string>
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

// The field's state as written in full (one array of its accumulation dtype: a u64 count,
// then the elements), checked to hold the field's elements.
absl::StatusOr<std::string> FullState(const FieldSpec& field, const FieldAccumulator& accumulator, size_t element) {
  ByteWriter full;
  FEDAGG_RETURN_IF_ERROR(accumulator.SerializeTo(full));
  std::string bytes = full.Take();
  uint64_t count = 0;
  if (bytes.size() >= sizeof(count)) std::memcpy(&count, bytes.data(), sizeof(count));
  if (count != static_cast<uint64_t>(field.type.num_elements()) || bytes.size() != sizeof(count) + count * element) {
    return absl::InternalError(absl::StrCat("field '", field.path, "': its state is not one array of its elements"));
  }
  return bytes;
}

// The state narrowed straight from its serialized elements; written in full (the bytes
// as they are) when a finite sum does not fit `Half`.
template <typename Acc, typename Half>
absl::Status WriteHalf(const FieldSpec& field, const FieldAccumulator& accumulator, DType half, ByteWriter& out) {
  FEDAGG_ASSIGN_OR_RETURN(const std::string full, FullState(field, accumulator, sizeof(Acc)));
  const char* elements = full.data() + sizeof(uint64_t);
  std::vector<Half> narrowed(static_cast<size_t>(field.type.num_elements()));
  for (size_t i = 0; i < narrowed.size(); ++i) {
    Acc value;
    std::memcpy(&value, elements + i * sizeof(Acc), sizeof(Acc));
    narrowed[i] = Narrow<Half>(value);
    if (std::isfinite(value) && !IsFinite(narrowed[i])) {  // beyond float16's range: keep it all
      out.Put<uint8_t>(static_cast<uint8_t>(field.accumulation_dtype));
      out.PutElements(full.data(), full.size());
      return absl::OkStatus();
    }
  }
  out.Put<uint8_t>(static_cast<uint8_t>(half));
  out.PutArray(reinterpret_cast<const uint16_t*>(narrowed.data()), narrowed.size());
  return absl::OkStatus();
}

// The 16-bit sums widened into the full layout as they are read, then given to the
// accumulator's own reader.
template <typename Acc>
absl::Status ReadHalf(const FieldSpec& field, FieldAccumulator& accumulator, DType half, ByteReader& in,
                      int64_t contributions) {
  std::vector<uint16_t> bits;
  FEDAGG_RETURN_IF_ERROR(in.GetArray(&bits));
  if (bits.size() != static_cast<size_t>(field.type.num_elements())) {
    return absl::DataLossError(absl::StrCat("partial aggregate: field '", field.path, "' holds ", bits.size(),
                                            " 16-bit sums, the field has ", field.type.num_elements()));
  }
  ByteWriter full;
  full.Put<uint64_t>(bits.size());
  for (const uint16_t b : bits) {
    full.Put(static_cast<Acc>(half == DType::kFloat16 ? ToFloat(Float16{b}) : ToFloat(BFloat16{b})));
  }
  const std::string bytes = full.Take();
  ByteReader widened(bytes);
  return accumulator.DeserializeFrom(widened, contributions);
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
