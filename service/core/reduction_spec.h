// ReductionSpec: what an aggregation reduces and how — its value type, the intrinsic of
// every leaf field, and numeric options. It is the part of an aggregation that the
// reduction core needs; lifecycle parts (id, quorum, deadline) live in service/rounds.
// Built once, validated, then shared read-only (std::shared_ptr<const ReductionSpec>).
#ifndef FEDAGG_SERVICE_CORE_REDUCTION_SPEC_H_
#define FEDAGG_SERVICE_CORE_REDUCTION_SPEC_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/dtype.h"
#include "service/core/intrinsic.h"
#include "service/core/privacy_spec.h"
#include "service/core/value_encoding.h"
#include "service/core/value_type.h"

namespace fedagg {

// The intrinsic a caller picks for one leaf field.
struct FieldIntrinsic {
  Intrinsic intrinsic = Intrinsic::kFederatedSum;
  // Report per-coordinate (per-row) contributor counts; sparse family only.
  bool report_counts = false;
  // How the field's values travel (plain: the declared dtype's elements).
  ValueEncoding value_encoding;
  // With differential privacy: this field's own L2 bound (0: none), applied before the
  // whole update's.
  double clip_norm = 0;
};

struct ReductionOptions {
  // Reject updates holding NaN or +-Inf in any floating-point value.
  bool require_finite = false;
  // Accumulate float32 / float16 / bfloat16 inputs in float64 instead of float32.
  bool float64_accumulation = false;
  // Sum floating-point fields exactly (exact_field_accumulator.h): results identical to
  // the bit for any order of updates and any tree shape. Implies finite values.
  bool deterministic = false;
  // Differential privacy (privacy_spec.h): every update is clipped before it is added, and
  // the root noises the sum. Its fields are float sums and means; a mean is accumulated
  // as its sum (FieldSpec::private_mean) and divided by the expected clients once noised.
  std::optional<PrivacySpec> privacy;
  // Secure aggregation (docs/SEMANTICS.md 13): every field is a dense sum or mean of
  // discretized values of one bit width b, masked by the clients; the partial sums
  // modulo 2^b (in the low bits of its int64 state), and the root reads the unmasked sum
  // as a b-bit signed integer (FieldSpec::modulus_bits).
  bool secure = false;
};

// Everything the reduction needs to know about one leaf field, derived once.
struct FieldSpec {
  std::string path;
  TensorType type;            // as declared: dtype is the transport dtype
  Intrinsic intrinsic;        // what the accumulators run
  Encoding encoding;
  // Quantized or discretized values (plain: type.dtype's elements); a discretized field
  // accumulates in int64 and reports its sum times the scale in result_dtype.
  ValueEncoding value_encoding;
  bool report_counts;         // caller asked for counts
  bool keeps_counts;          // counts kept (asked for, or needed by the intrinsic)
  bool keeps_weight_sums;     // per-row weight sums kept (sparse_weighted_mean divides by them)
  int64_t rows;               // row-sparse: shape[0]; sparse: num_elements; dense: 1
  int64_t row_width;          // row-sparse: elements per row; sparse: 1; dense: num_elements
  DType accumulation_dtype;   // float32, float64 or int64
  DType result_dtype;         // dtype of the reported values
  // Summed exactly (a deterministic aggregation's floating-point field that sums:
  // every intrinsic but federated_max and federated_min): ExactFieldAccumulator.
  bool exact_sum = false;
  // Differential privacy: the field's own L2 bound (0: none), and whether it was declared
  // a mean, which `intrinsic` then runs as the matching sum (the root divides the noised
  // sum by the expected clients, never by the number counted).
  double clip_norm = 0;
  bool private_mean = false;
  // The intrinsic the spec declared: `intrinsic`, but for a private mean.
  Intrinsic declared_intrinsic = Intrinsic::kFederatedSum;
  // Secure aggregation: the sum is taken modulo 2^modulus_bits, and its report reads the
  // low modulus_bits bits of the int64 state as a signed integer (0: the whole state).
  int modulus_bits = 0;
};

class ReductionSpec {
 public:
  // `intrinsics` holds one entry per leaf of `type`, in depth-first order.
  static absl::StatusOr<std::shared_ptr<const ReductionSpec>> Create(
      ValueType type, std::vector<FieldIntrinsic> intrinsics, ReductionOptions options = {});

  const ValueType& value_type() const { return value_type_; }
  const std::vector<FieldSpec>& fields() const { return fields_; }
  const ReductionOptions& options() const { return options_; }
  // True when some field's intrinsic uses the update weight (so updates must carry one).
  bool has_weighted_field() const { return has_weighted_field_; }
  // True when some weighted field accumulates in float32 (its weights are range-limited).
  bool has_float32_weighted_field() const { return has_float32_weighted_field_; }
  // One line naming every field, its type, intrinsic and options; equal strings mean
  // partial aggregates of the two specs can be merged.
  const std::string& canonical() const { return canonical_; }

 private:
  ReductionSpec() = default;

  ValueType value_type_;
  std::vector<FieldSpec> fields_;
  ReductionOptions options_;
  bool has_weighted_field_ = false;
  bool has_float32_weighted_field_ = false;
  std::string canonical_;
};

// A sparse-family field with encoded values as its backend accumulator sees them once
// decoded (decoding_field_accumulator.h): plain values of the field's accumulation dtype
// (int64 integer steps for a discretized field), reported in that dtype's own result
// dtype (a discretized field's integer sum or float64 mean, scaled afterwards).
FieldSpec DecodedFieldSpec(const FieldSpec& field);

// The bytes an aggregation of `spec` holds in accumulator state as soon as it is made,
// before any update, on every backend: each field's values in its accumulation dtype (or
// its exact sums), and the per-row counts and weight sums it keeps (sparse_sum_sparse: none, its state grows
// with the coordinates it receives). Checked before an aggregation is made
// (Aggregation::Make), so that a spec the node cannot hold is refused, not allocated.
uint64_t FixedStateBytes(const ReductionSpec& spec);
// One field's share of FixedStateBytes.
uint64_t FixedStateBytes(const FieldSpec& field);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_REDUCTION_SPEC_H_
