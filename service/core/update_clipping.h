// Update clipping: differential privacy's bound on one client's influence, applied by
// the node that receives the update, after it is validated and before it is added. Each
// field is first held to its own bound (FieldSpec::clip_norm, where declared), then the
// whole update to the spec's clip_norm C, by scaling the values in place; the norm is the
// L2 norm of what the update adds (a sparse update's repeated indices summed first; a
// quantized field's decoded values, whose rotation keeps the norm). Rounding a scaled value
// back to its dtype never takes the norm above the bound: the factors leave that margin.
// A discretized field is clipped by its client (its integers are the protocol's); the node
// refuses one beyond the bound by more than the rounding's slack (one step a coordinate)
// and scales one within it down to the bound by truncating its integers.
#ifndef FEDAGG_SERVICE_CORE_UPDATE_CLIPPING_H_
#define FEDAGG_SERVICE_CORE_UPDATE_CLIPPING_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// Clips `update`, validated against `spec` (which has privacy), whose field f's values
// are the writable `values[f]` (the same memory its view reads). True when the whole
// update's bound scaled it (what adaptive clipping counts); a field's own bound alone
// does not count. INVALID_ARGUMENT, nothing changed, for a non-finite norm or a
// discretized field beyond its slack.
absl::StatusOr<bool> ClipUpdate(const ReductionSpec& spec, const UpdateView& update,
                                absl::Span<const absl::Span<std::byte>> values);

// The L2 norm of what one field's value adds to the sum (for tests and the client's own
// check): repeated sparse indices summed, encoded values decoded.
double UpdateFieldNorm(const FieldSpec& field, const FieldValue& value);

// What a client multiplies its update by before discretizing a private spec's discretized
// fields (they are clipped by the client; the node refuses one beyond the bound by more
// than the rounding's slack): `plain` holds every field in its declared form with plain
// floating values of any dtype (each FieldValue's own), before any value encoding. The
// factor takes the whole update's norm to the clip norm less a margin for the stochastic
// rounding to come, n s^2 / (8 C) + 3 s for n discretized coordinates of scale s at most,
// so that the rounded update is within the bound as a rule; 1 when it is within already.
double ClientClipFactor(const ReductionSpec& spec, const UpdateView& plain);
// The FieldSpec of `field` for its plain values of `dtype`: what ScaleFieldValues and
// UpdateFieldNorm take for an update before it is encoded.
FieldSpec PlainFieldSpec(const FieldSpec& field, DType dtype);

// Multiplies what one field's `value` stands for by `factor` (in (0, 1)), in place in
// `bytes` (its values' memory): floats scaled, a quantized field's block scales scaled, a
// discretized field's integers truncated toward zero. What a client that clips does too.
void ScaleFieldValues(const FieldSpec& field, const FieldValue& value, absl::Span<std::byte> bytes, double factor);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_UPDATE_CLIPPING_H_
