// Complete validation of one client update against a ReductionSpec: field count,
// encodings, dtypes, sizes, index bounds, weight and (when asked) finiteness.
// Nothing reaches an accumulator before this returns OK, so bad input never half-applies.
#ifndef FEDAGG_SERVICE_CORE_UPDATE_VALIDATOR_H_
#define FEDAGG_SERVICE_CORE_UPDATE_VALIDATOR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// Weights a weighted field accumulated in float32 accepts (2^-40 .. 2^40).
inline constexpr double kMinFloat32Weight = 0x1p-40;
inline constexpr double kMaxFloat32Weight = 0x1p40;

// INVALID_ARGUMENT "field 'PATH' (TYPE, INTRINSIC): PROBLEM": how every refusal of one
// field's value is worded, by the server and by the client library's own checks.
absl::Status FieldError(const FieldSpec& field, absl::string_view problem);

// INVALID_ARGUMENT with a message naming the field and the problem, or OK.
absl::Status ValidateUpdate(const ReductionSpec& spec, const UpdateView& update);

// ValidateUpdate, marking each sparse field whose indices ascend (FieldValue::ascending);
// after an error the marks mean nothing (the update is refused).
absl::Status ValidateAndMarkUpdate(const ReductionSpec& spec, UpdateView& update);

// Validates one field alone (used when fields arrive one at a time).
absl::Status ValidateField(const ReductionSpec& spec, const FieldSpec& field,
                           const FieldValue& value);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_UPDATE_VALIDATOR_H_
