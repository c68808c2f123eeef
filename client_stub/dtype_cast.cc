// Casting an array to its field's declared dtype: exact casts at once, lossy ones on request.
#include "client_stub/dtype_cast.h"

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

template <typename T>
void Put(Tensor& out, size_t i, T value) {
  std::memcpy(out.bytes.data() + i * sizeof(T), &value, sizeof(T));
}

}  // namespace

bool IsExactCast(DType from, DType to) {
  if (from == to) return true;
  switch (from) {
    case DType::kFloat16:
    case DType::kBFloat16: return to == DType::kFloat32 || to == DType::kFloat64;
    case DType::kFloat32: return to == DType::kFloat64;
    case DType::kInt32: return to == DType::kInt64 || to == DType::kFloat64;
    default: return false;
  }
}

absl::StatusOr<Tensor> CastToDeclared(const Tensor& tensor, DType declared, CastPolicy policy,
                                      const std::string& what) {
  if (tensor.dtype == declared) return tensor;
  const std::string cast = absl::StrCat(DTypeName(tensor.dtype), " to ", DTypeName(declared));
  if (IsFloat(tensor.dtype) && !IsFloat(declared)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", DTypeName(tensor.dtype), " but the field declares ",
                                                   DTypeName(declared), ": a float array is never cast to integers; "
                                                   "send integer values"));
  }
  if (!IsExactCast(tensor.dtype, declared) && policy == CastPolicy::kExactOnly) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", DTypeName(tensor.dtype), " but the field declares ", DTypeName(declared), ": casting ", cast,
        " can lose precision or range, so it is not done silently; convert the array yourself, or ask for the cast "
        "(fedagg-client --allow_lossy_cast, Python allow_lossy_cast=True)"));
  }
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
        Put<double>(out, i, value);
        break;
      case DType::kFloat32: {
        const float narrowed = IsFloat(tensor.dtype) ? static_cast<float>(value) : static_cast<float>(IntAt(tensor, i));
        if (finite && !std::isfinite(narrowed)) {
          return absl::InvalidArgumentError(absl::StrCat(what, " element ", i, " (", value, ") overflows float32"));
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
              absl::StrCat(what, " element ", i, " (", value, ") overflows ", DTypeName(declared)));
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
