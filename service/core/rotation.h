// The random rotation of a quantized field (ValueEncoding::rotation): before quantizing,
// a client rotates each whole run of R coordinates (R a power of two) as
// y = H D x / sqrt(R), D the diagonal of random signs the aggregation's rotation seed
// draws (the same for every client) and H the R x R Hadamard matrix; a shorter last run
// is left as it is. A rotated run's entries are near Gaussian whatever x was, so the
// block scales fit them and the quantization error falls (docs/SEMANTICS.md section 11).
// Nodes add rotated values as they are; the root undoes the rotation once, on the result,
// x = D H y / sqrt(R) (the transform is its own inverse up to the signs). The client
// libraries compute it identically in float64 (the Python package's
// fedagg.value_encoding), so the same seed gives the same bytes.
#ifndef FEDAGG_SERVICE_CORE_ROTATION_H_
#define FEDAGG_SERVICE_CORE_ROTATION_H_

#include <cstdint>

#include "absl/types/span.h"
#include "portable/portable_math.h"
#include "service/core/aggregate_result.h"
#include "service/core/value_encoding.h"

namespace fedagg {

// Whether coordinate i's sign is negative, for the signs `seed` draws (shared with the
// device code that rotates a result back: portable/portable_math.h).
using portable::RotationSignNegative;

// y = H D x / sqrt(R) over each whole run of `encoding.rotation` values, in place.
void Rotate(const ValueEncoding& encoding, absl::Span<double> values);
// x = D H y / sqrt(R), the inverse, in place.
void Unrotate(const ValueEncoding& encoding, absl::Span<double> values);

// A reported dense result of a rotated field, rotated back in place (in float64, written
// back in the result's dtype). Nothing for a field that is not rotated.
void UnrotateResult(const ValueEncoding& encoding, Tensor& result);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_ROTATION_H_
