// Element types of tensors: sizes, names and parsing.
#include "service/core/dtype.h"

#include "absl/strings/str_cat.h"

namespace fedagg {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

bool IsFloating(DType dtype) { return !IsInteger(dtype); }

bool IsInteger(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "invalid";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                      DType::kFloat16, DType::kBFloat16}) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "'; expected one of float32, float64, int32, int64, float16, bfloat16"));
}

bool IsValidDType(uint8_t raw) { return raw >= 1 && raw <= 6; }

}  // namespace fedagg
