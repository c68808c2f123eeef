// Update clipping: per-field and whole-update L2 bounds, scaled in place.
#include "service/core/update_clipping.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/encoded_values.h"
#include "service/core/half_float.h"
#include "service/core/update_validator.h"

namespace fedagg {
namespace {

// Relative rounding of a value scaled and stored back, per stored kind: the factor is
// shrunk by it, so that the stored values' norm stays within the bound.
double StoreRounding(const FieldSpec& field) {
  if (field.value_encoding.quantized()) return 0x1p-23;  // a block's float32 scale
  if (field.value_encoding.discretized()) return 0;    // truncated toward zero: never grows
  switch (field.type.dtype) {
    case DType::kFloat64: return 0x1p-52;
    case DType::kFloat16: return 0x1p-10;
    case DType::kBFloat16: return 0x1p-7;
    default: return 0x1p-23;
  }
}
// The relative error of a norm computed in float64 over up to 2^27 terms, with a wide margin.
constexpr double kNormSlack = 0x1p-24;

// Element i of a field's values in float64, whatever the dtype or encoding.
class ValueReader {
 public:
  ValueReader(const FieldSpec& field, const FieldValue& value, int64_t elements)
      : field_(field), value_(value), encoded_(field.value_encoding, value.values, elements) {}
  double operator()(int64_t i) const {
    if (field_.value_encoding.encoded()) return encoded_.Decode(i);
    const std::byte* p = value_.values.data();
    switch (field_.type.dtype) {
      case DType::kFloat64: return Load<double>(p, i);
      case DType::kFloat16: return ToFloat(Load<Float16>(p, i));
      case DType::kBFloat16: return ToFloat(Load<BFloat16>(p, i));
      default: return Load<float>(p, i);
    }
  }

 private:
  template <typename T>
  static T Load(const std::byte* p, int64_t i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
  }
  const FieldSpec& field_;
  const FieldValue& value_;
  EncodedValues encoded_;
};

int64_t EntryCount(const FieldSpec& field, const FieldValue& value) {
  return field.encoding == Encoding::kDense ? 1 : static_cast<int64_t>(value.indices.size());
}
int64_t EntryWidth(const FieldSpec& field) { return field.row_width; }

// The sum of squares of n floats in double, eight lanes, compiled for AVX2 too (the
// clipping of a large update is two passes over it on the receiving thread: docs/BENCHMARKS.md 8a).
template <typename T>
FEDAGG_VECTOR_CLONES double SquaresOfFloats(const T* __restrict v, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) lanes[lane] += static_cast<double>(v[i + lane]) * static_cast<double>(v[i + lane]);
  }
  for (; i < n; ++i) lanes[0] += static_cast<double>(v[i]) * static_cast<double>(v[i]);
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

// The sum of squares of n values read by `read(i)` (widened to double), in eight lanes so
// that the compiler may keep them in vector registers (and the rounding stays small).
template <typename Read>
double SumOfSquares(int64_t n, Read read) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) {
      const double v = read(i + lane);
      lanes[lane] += v * v;
    }
  }
  for (; i < n; ++i) lanes[0] += read(i) * read(i);
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

// The sum of squares of a run of values as they arrived: plain elements of their dtype,
// or a discretized field's integers times its scale; a quantized field's decoded values.
double SquaresOfValues(const FieldSpec& field, const FieldValue& value, int64_t elements) {
  const std::byte* p = value.values.data();
  const ValueEncoding& encoding = field.value_encoding;
  if (encoding.quantized()) {
    const EncodedValues encoded(encoding, value.values, elements);
    return SumOfSquares(elements, [&](int64_t i) { return encoded.Decode(i); });
  }
  if (encoding.discretized()) {
    const uint8_t* codes = reinterpret_cast<const uint8_t*>(p);
    const double steps = SumOfSquares(elements, [&](int64_t i) {
      return static_cast<double>(EncodedValues::IntegerAt(codes, encoding.bits, i));
    });
    return steps * encoding.scale * encoding.scale;
  }
  switch (field.type.dtype) {
    case DType::kFloat64:
      return SquaresOfFloats(reinterpret_cast<const double*>(p), elements);
    case DType::kFloat16: {
      const Float16* v = reinterpret_cast<const Float16*>(p);
      return SumOfSquares(elements, [v](int64_t i) { return static_cast<double>(ToFloat(v[i])); });
    }
    case DType::kBFloat16: {
      const BFloat16* v = reinterpret_cast<const BFloat16*>(p);
      return SumOfSquares(elements, [v](int64_t i) { return static_cast<double>(ToFloat(v[i])); });
    }
    default:
      return SquaresOfFloats(reinterpret_cast<const float*>(p), elements);
  }
}

// Sum of squares of what the field adds: a dense field's values; a sparse field's entries
// grouped by index (rows by row id), each group's sum squared. Entries whose indices are
// known to ascend without a repeat (the common case) are their values' squares.
double SquaredNorm(const FieldSpec& field, const FieldValue& value) {
  const int64_t entries = EntryCount(field, value);
  const int64_t width = EntryWidth(field);
  if (field.encoding == Encoding::kDense) return SquaresOfValues(field, value, width);
  if (value.ascending && std::adjacent_find(value.indices.begin(), value.indices.end()) == value.indices.end()) {
    return SquaresOfValues(field, value, entries * width);
  }
  const ValueReader read(field, value, entries * width);
  std::vector<int64_t> order(static_cast<size_t>(entries));
  std::iota(order.begin(), order.end(), 0);
  if (!value.ascending) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return value.indices[a] < value.indices[b]; });
  }
  double total = 0;
  std::vector<double> group(static_cast<size_t>(width));
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin + 1;
    while (end < order.size() && value.indices[order[end]] == value.indices[order[begin]]) ++end;
    std::fill(group.begin(), group.end(), 0.0);
    for (size_t k = begin; k < end; ++k) {
      for (int64_t j = 0; j < width; ++j) group[j] += read(order[k] * width + j);
    }
    for (double g : group) total += g * g;
    begin = end;
  }
  return total;
}

// Multiplies floats by `factor` in their own type (a float32 factor rounds by 2^-24 at
// most, within the margin StoreRounding leaves), compiled for AVX2 too.
template <typename T>
FEDAGG_VECTOR_CLONES void ScaleInPlace(T* __restrict v, int64_t n, T factor) {
  for (int64_t i = 0; i < n; ++i) v[i] *= factor;
}
template <typename T>
void ScaleFloats(absl::Span<std::byte> bytes, double factor) {
  ScaleInPlace(reinterpret_cast<T*>(bytes.data()), static_cast<int64_t>(bytes.size() / sizeof(T)), static_cast<T>(factor));
}
template <typename Half, Half (*kFromFloat)(float)>
void ScaleHalves(absl::Span<std::byte> bytes, double factor) {
  Half* v = reinterpret_cast<Half*>(bytes.data());
  const size_t n = bytes.size() / sizeof(Half);
  for (size_t i = 0; i < n; ++i) v[i] = kFromFloat(static_cast<float>(ToFloat(v[i]) * factor));
}
template <typename Int>
void TruncateIntegers(std::byte* codes, int64_t n, double factor) {
  for (int64_t i = 0; i < n; ++i) {
    Int k;
    std::memcpy(&k, codes + i * static_cast<int64_t>(sizeof(Int)), sizeof(Int));
    const Int scaled = static_cast<Int>(std::trunc(static_cast<double>(k) * factor));
    std::memcpy(codes + i * static_cast<int64_t>(sizeof(Int)), &scaled, sizeof(Int));
  }
}

}  // namespace

void ScaleFieldValues(const FieldSpec& field, const FieldValue& value, absl::Span<std::byte> bytes, double factor) {
  const ValueEncoding& encoding = field.value_encoding;
  const int64_t elements = EntryCount(field, value) * EntryWidth(field);
  if (encoding.quantized()) {  // a value is its block's scale times a code's fixed level
    ScaleFloats<float>(bytes.first(static_cast<size_t>(encoding.Blocks(elements)) * sizeof(float)), factor);
    return;
  }
  if (encoding.discretized()) {
    std::byte* codes = bytes.data() + static_cast<size_t>(encoding.Blocks(elements)) * sizeof(float);
    switch (encoding.bits) {
      case 8: TruncateIntegers<int8_t>(codes, elements, factor); return;
      case 16: TruncateIntegers<int16_t>(codes, elements, factor); return;
      default: TruncateIntegers<int32_t>(codes, elements, factor); return;
    }
  }
  switch (field.type.dtype) {
    case DType::kFloat64: ScaleFloats<double>(bytes, factor); return;
    case DType::kFloat16: ScaleHalves<Float16, ToFloat16>(bytes, factor); return;
    case DType::kBFloat16: ScaleHalves<BFloat16, ToBFloat16>(bytes, factor); return;
    default: ScaleFloats<float>(bytes, factor); return;
  }
}

FieldSpec PlainFieldSpec(const FieldSpec& field, DType dtype) {
  FieldSpec plain = field;
  plain.type.dtype = dtype;
  plain.value_encoding = ValueEncoding();
  return plain;
}

double ClientClipFactor(const ReductionSpec& spec, const UpdateView& plain) {
  const std::vector<FieldSpec>& fields = spec.fields();
  const double clip = spec.options().privacy->clip_norm;
  double squares = 0, scale = 0, coordinates = 0;
  for (size_t f = 0; f < fields.size() && f < plain.fields.size(); ++f) {
    const FieldValue& value = plain.fields[f];
    squares += SquaredNorm(PlainFieldSpec(fields[f], value.dtype), value);
    if (!fields[f].value_encoding.discretized()) continue;
    scale = std::max(scale, fields[f].value_encoding.scale);
    coordinates += static_cast<double>(value.values.size() / DTypeSize(value.dtype));
  }
  const double margin = std::min(clip / 2, coordinates * scale * scale / (8 * clip) + 3 * scale);
  const double bound = clip * (1 - 0x1p-20) - margin;
  const double norm = std::sqrt(squares);
  return norm > bound ? bound / norm : 1.0;
}

double UpdateFieldNorm(const FieldSpec& field, const FieldValue& value) {
  return std::sqrt(SquaredNorm(field, value));
}

absl::StatusOr<bool> ClipUpdate(const ReductionSpec& spec, const UpdateView& update,
                                absl::Span<const absl::Span<std::byte>> values) {
  const double bound = spec.options().privacy->clip_norm;
  const std::vector<FieldSpec>& fields = spec.fields();
  std::vector<double> factors(fields.size(), 1.0);
  double total = 0;
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldSpec& field = fields[f];
    const double norm = std::sqrt(SquaredNorm(field, update.fields[f]));
    if (!std::isfinite(norm)) {
      return FieldError(field, "differential privacy bounds the norm of every update, and this one's is not "
                               "finite (a NaN or an infinity); send finite values");
    }
    const double field_bound = field.clip_norm > 0 ? std::min(field.clip_norm, bound) : bound;
    if (field.value_encoding.discretized()) {
      const double slack =
          field.value_encoding.scale * std::sqrt(static_cast<double>(EntryCount(field, update.fields[f]) *
                                                                     EntryWidth(field)));
      if (norm > field_bound + slack) {
        // The update's own norm stays out of the message (it may be logged); the bound
        // and the slack are the spec's.
        return FieldError(field, absl::StrCat("its discretized values' L2 norm exceeds the clipping bound ",
                                              field_bound, " by more than the rounding's slack ", slack,
                                              ": clip the update to the bound before discretizing it"));
      }
    }
    if (field.clip_norm > 0 && norm > field.clip_norm * (1 - kNormSlack)) {
      factors[f] = field.clip_norm * (1 - kNormSlack) / norm;
    }
    total += norm * norm * factors[f] * factors[f];
  }
  const double norm = std::sqrt(total);
  const bool clipped = norm > bound * (1 - kNormSlack);
  for (size_t f = 0; f < fields.size(); ++f) {
    if (clipped) factors[f] *= bound * (1 - kNormSlack) / norm;
    if (factors[f] < 1) ScaleFieldValues(fields[f], update.fields[f], values[f], factors[f] / (1 + StoreRounding(fields[f])));
  }
  return clipped;
}

}  // namespace fedagg
