// Casting an array to the dtype its field declares, by the rule both of fedagg's clients
// follow (fedagg-client here, the Python client in update_input.py), so one input means
// the same thing in both:
//   - a cast that keeps every value exactly happens at once (float32 to float64 always;
//     float64 [1.0, 2.5] to float32; int64 values that fit to int32);
//   - a cast that would change a value (float64 0.1 to float32, 2^53 + 1 to float64, a
//     float32 to bfloat16 that rounds) is refused, naming the first such element, unless
//     the caller opts in (fedagg-client --allow_lossy_cast, Python allow_lossy_cast=True);
//     with the opt-in values round, and one that overflows the declared dtype or does not
//     fit an integer dtype is still refused;
//   - a float array for an integer field is always refused.
#ifndef FEDAGG_CLIENT_STUB_DTYPE_CAST_H_
#define FEDAGG_CLIENT_STUB_DTYPE_CAST_H_

#include <string>

#include "absl/status/statusor.h"
#include "service/core/aggregate_result.h"
#include "service/core/dtype.h"

namespace fedagg {

enum class CastPolicy { kExactOnly, kAllowLossy };

// `tensor` in `declared` (a copy; the same tensor when the dtypes agree). INVALID_ARGUMENT
// naming `what` (e.g. "field 'w' values") for a refused cast or an overflowing value.
absl::StatusOr<Tensor> CastToDeclared(const Tensor& tensor, DType declared, CastPolicy policy,
                                      const std::string& what);

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_DTYPE_CAST_H_
