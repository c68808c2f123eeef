// Casting an array to its field's declared dtype: value-preserving casts at once, lossy ones on request.
#include "client_stub/dtype_cast.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "service/core/half_float.h"

namespace fedagg {
namespace {

bool IsFloat(DType dtype) { return dtype != DType::kInt32 && dtype != DType::kInt64; }

// Element i of `tensor` as a double (floats) or int64 (integers).
double FloatAt(const Tensor& tensor, size_t i) {
  switch (tensor.dtype) {
    case DType::kFloat32: return tensor.values<float>()[i];
    case DType::kFloat64: return tensor.values<double>()[i];
    case DType::kFloat16: return ToFloat(Float16{tensor.values<uint16_t>()[i]});
    case DType::kBFloat16: return ToFloat(BFloat16{tensor.values<uint16_t>()[i]});
    default: return 0;
  }
}
int64_t IntAt(const Tensor& tensor, size_t i) {
  return tensor.dtype == DType::kInt32 ? tensor.values<int32_t>()[i] : tensor.values<int64_t>()[i];
}

// The shortest decimal that reads back as `value` ("0.1", "0.10000000149011612").
std::string Shortest(double value) {
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, written.ptr);
}

// Whether `value` is exactly the integer `original` (no undefined conversion out of range).
bool SameInteger(double value, int64_t original) {
  return value >= -9223372036854775808.0 && value < 9223372036854775808.0 && static_cast<int64_t>(value) == original;
}

template <typename T>
void Put(Tensor& out, size_t i, T value) {
  std::memcpy(out.bytes.data() + i * sizeof(T), &value, sizeof(T));
}

}  // namespace

absl::StatusOr<Tensor> CastToDeclared(const Tensor& tensor, DType declared, CastPolicy policy,
                                      const std::string& what) {
  if (tensor.dtype == declared) return tensor;
  if (IsFloat(tensor.dtype) && !IsFloat(declared)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", DTypeName(tensor.dtype), " but the field declares ",
                                                   DTypeName(declared), ": a float array is never cast to integers; "
                                                   "send integer values"));
  }
  // A value the cast changes: refused without the opt-in.
  auto changed = [&](size_t i, const std::string& value, const std::string& became) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", DTypeName(tensor.dtype), " but the field declares ", DTypeName(declared), ": element ", i,
        " (", value, ") would become ", became, " in ", DTypeName(declared),
        ", so the cast is not done silently; convert the array yourself, or ask for the cast "
        "(fedagg-client --allow_lossy_cast, Python allow_lossy_cast=True)"));
  };
  const bool exact_only = policy == CastPolicy::kExactOnly;
  const size_t n = tensor.bytes.size() / DTypeSize(tensor.dtype);
  Tensor out;
  out.dtype = declared;
  out.shape = tensor.shape;
  out.bytes.resize(n * DTypeSize(declared));
  for (size_t i = 0; i < n; ++i) {
    if (!IsFloat(declared)) {  // integer to integer
      const int64_t value = IntAt(tensor, i);
      if (declared == DType::kInt64) {
        Put<int64_t>(out, i, value);
      } else if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " element ", i, " (", value, ") does not fit in int32"));
      } else {
        Put<int32_t>(out, i, static_cast<int32_t>(value));
      }
      continue;
    }
    const double value = IsFloat(tensor.dtype) ? FloatAt(tensor, i) : static_cast<double>(IntAt(tensor, i));
    const bool finite = std::isfinite(value);
    switch (declared) {
      case DType::kFloat64:
        if (exact_only && !IsFloat(tensor.dtype) && !SameInteger(value, IntAt(tensor, i))) {
          return changed(i, absl::StrCat(IntAt(tensor, i)), Shortest(value));
        }
        Put<double>(out, i, value);
        break;
      case DType::kFloat32: {
        const float narrowed = IsFloat(tensor.dtype) ? static_cast<float>(value) : static_cast<float>(IntAt(tensor, i));
        if (finite && !std::isfinite(narrowed)) {
          return absl::InvalidArgumentError(absl::StrCat(what, " element ", i, " (", Shortest(value), ") overflows float32"));
        }
        const bool kept = IsFloat(tensor.dtype) ? (narrowed == value || (std::isnan(value) && std::isnan(narrowed)))
                                                : SameInteger(narrowed, IntAt(tensor, i));
        if (exact_only && !kept) {
          return changed(i, IsFloat(tensor.dtype) ? Shortest(value) : absl::StrCat(IntAt(tensor, i)), Shortest(narrowed));
        }
        Put<float>(out, i, narrowed);
        break;
      }
      case DType::kFloat16:
      case DType::kBFloat16: {
        const float wide = static_cast<float>(value);
        const uint16_t bits = declared == DType::kFloat16 ? ToFloat16(wide).bits : ToBFloat16(wide).bits;
        const double back = declared == DType::kFloat16 ? ToFloat(Float16{bits}) : ToFloat(BFloat16{bits});
        if (finite && !std::isfinite(back)) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, " element ", i, " (", Shortest(value), ") overflows ", DTypeName(declared)));
        }
        if (exact_only && back != value && !(std::isnan(value) && std::isnan(back))) {
          return changed(i, IsFloat(tensor.dtype) ? Shortest(value) : absl::StrCat(IntAt(tensor, i)), Shortest(back));
        }
        Put<uint16_t>(out, i, bits);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

}  // namespace fedagg
