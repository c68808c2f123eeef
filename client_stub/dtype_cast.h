// Casting an array to the dtype its field declares, by the rule both of fedagg's clients
// follow (fedagg-client here, the Python client in update_input.py), so one input means
// the same thing in both:
//   - exact casts happen at once: every value of the source dtype is representable in the
//     declared one (float16 / bfloat16 -> float32 / float64, float32 -> float64,
//     int32 -> int64, int32 -> float64);
//   - lossy casts (float64 -> float32, int64 -> float64, int64 -> int32, any int -> a
//     narrower float, float32 -> float16 / bfloat16) are refused unless the caller opts in
//     (fedagg-client --allow_lossy_cast, Python allow_lossy_cast=True); with the opt-in
//     they round, and a value that overflows the declared dtype is still refused;
//   - a float array for an integer field is always refused.
#ifndef FEDAGG_CLIENT_STUB_DTYPE_CAST_H_
#define FEDAGG_CLIENT_STUB_DTYPE_CAST_H_

#include <string>

#include "absl/status/statusor.h"
#include "service/core/aggregate_result.h"
#include "service/core/dtype.h"

namespace fedagg {

enum class CastPolicy { kExactOnly, kAllowLossy };

// Whether every value of `from` is exactly a value of `to`.
bool IsExactCast(DType from, DType to);

// `tensor` in `declared` (a copy; the same tensor when the dtypes agree). INVALID_ARGUMENT
// naming `what` (e.g. "field 'w' values") for a refused cast or an overflowing value.
absl::StatusOr<Tensor> CastToDeclared(const Tensor& tensor, DType declared, CastPolicy policy,
                                      const std::string& what);

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_DTYPE_CAST_H_
