// Element types of tensors (TFF's dtypes) and their properties.
// float16 and bfloat16 are transport types: clients may send them to halve bandwidth,
// and fedagg widens them to float32 (or float64) before any arithmetic.
#ifndef FEDAGG_SERVICE_CORE_DTYPE_H_
#define FEDAGG_SERVICE_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace fedagg {

enum class DType : uint8_t {
  kFloat32 = 1,
  kFloat64 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,
  kBFloat16 = 6,
};

// Size of one element in bytes.
size_t DTypeSize(DType dtype);
bool IsFloating(DType dtype);
bool IsInteger(DType dtype);
// TFF's spelling: "float32", "int64", "bfloat16", ...
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
// True when `raw` is one of the enumerators above (for decoding untrusted bytes).
bool IsValidDType(uint8_t raw);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_DTYPE_H_
