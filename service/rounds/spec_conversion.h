// Conversions between the fedagg.v1 protobuf messages and the aggregation core's types:
// value types, intrinsics, specs (with every check an operator's input needs) and results.
// No gRPC here: only generated messages.
#ifndef FEDAGG_SERVICE_ROUNDS_SPEC_CONVERSION_H_
#define FEDAGG_SERVICE_ROUNDS_SPEC_CONVERSION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedagg/v1/types.pb.h"
#include "service/core/aggregate_result.h"
#include "service/core/reduction_spec.h"
#include "service/core/value_type.h"
#include "service/secagg/graph_parameters.h"
#include "service/secagg/secagg_unmasker.h"

namespace fedagg {

// An aggregation's spec, checked and converted once at creation.
// A secure aggregation's cohorts (v1::SecureAggregation with its defaults filled in).
struct SecureCohortOptions {
  static constexpr int kMaxCohort = 10000;
  static constexpr int kDefaultDegree = 64;
  // The rates a cohort's graph is derived from (graph_parameters.h).
  struct ThreatModel {
    double adversarial_rate = 0;
    double dropout_rate = 0;
  };
  int min_cohort = 3;
  int max_cohort = 1000;
  int degree = 0;     // 0: kDefaultDegree
  int threshold = 0;  // 0: half the cohort's degree, plus one
  std::optional<ThreatModel> threat;  // given: degree and threshold derived per cohort
  absl::Duration stage_timeout = absl::Seconds(30);

  // The neighbour graph's degree (even; a cohort of n clients gives each min(degree, n - 1)
  // neighbours: the complete graph when it is small) and the shares that recover a secret,
  // for a cohort of `clients`: derived from the threat model when there is one
  // (FAILED_PRECONDITION when no graph meets its bounds), else as declared or the defaults.
  absl::StatusOr<CohortGraphParameters> GraphFor(int clients) const;
};
SecureCohortOptions SecureCohortOptionsFromProto(const v1::SecureAggregation& proto);
// INVALID_ARGUMENT, saying which value and why, for cohort bounds, degree or threshold out
// of range (docs/SEMANTICS.md 13 says how they are chosen).
absl::Status CheckSecureAggregation(const v1::SecureAggregation& secure);

struct AggregationConfig {
  std::string id;
  // A secure aggregation at its root (the node that created it): the key pair its clients
  // seal their unmasking shares to (kept in the root's checkpoint: a restarted root has it
  // again, aggregation_durability.cc).
  std::shared_ptr<const SecAggUnmasker> secure_unmasker;
  std::shared_ptr<const ReductionSpec> reduction;
  int64_t min_contributions = 0;
  int64_t max_contributions = 0;  // 0: unlimited
  absl::Time deadline = absl::InfiniteFuture();
  v1::AggregationSpec proto;      // as accepted, handed to clients and child aggregators
};

absl::StatusOr<ValueType> ValueTypeFromProto(const v1::ValueType& proto);
v1::ValueType ValueTypeToProto(const ValueType& type);
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype);
v1::DType DTypeToProto(DType dtype);

// A field's value encoding from its proto (unset: plain), checked (ValueEncoding::Check).
absl::StatusOr<ValueEncoding> ValueEncodingFromProto(const v1::FieldEncoding& proto);
v1::FieldEncoding ValueEncodingToProto(const ValueEncoding& encoding);

// Intrinsics as a person writes them on a command line: comma-separated names, each with
// optional "+counts" (per-coordinate counts), "+clip=C" (the field's own L2 bound under
// differential privacy, FieldIntrinsic.clip_norm) and a last "@ENCODING"
// (ParseValueEncoding's spelling), e.g. "federated_mean+clip=0.5@quantized:8,sparse_sum+counts".
// INVALID_ARGUMENT for an unknown name or modifier.
absl::StatusOr<std::vector<v1::FieldIntrinsic>> ParseIntrinsicList(absl::string_view list);

// A command line's --encoding: `encoding` (ParseValueEncoding's spelling; empty or
// "plain": nothing) given to every field of `fields` whose intrinsic is linear (all but
// federated_max and federated_min: the dense sums and means and the sparse family) and
// that names no encoding of its own. A field that cannot take it is refused when the
// spec is checked (ConfigFromProto).
absl::Status ApplyEncodingToLinearFields(absl::string_view encoding, std::vector<v1::FieldIntrinsic>& fields);

// Gives every rotated quantized field of `spec` that has no rotation seed (0) the next of
// `next_seed` (never 0): the root does it with random seeds when it creates an aggregation,
// a load generator with seeds of its own before it encodes its updates.
void AssignRotationSeeds(v1::AggregationSpec& spec, absl::FunctionRef<uint64_t()> next_seed);

// A spec's differential privacy (unchecked: ReductionSpec::Create checks it); an adaptive
// clipping's count_stddev of 0 becomes its default, 0.05 * expected_clients.
PrivacySpec PrivacySpecFromProto(const v1::DifferentialPrivacy& proto);

// INVALID_ARGUMENT naming the offending field for any spec a server cannot run.
absl::StatusOr<AggregationConfig> ConfigFromProto(const v1::AggregationSpec& proto);

v1::Tensor TensorToProto(const Tensor& tensor);
v1::PrivacyReport PrivacyReportToProto(const PrivacyReport& report);
PrivacyReport PrivacyReportFromProto(const v1::PrivacyReport& proto);

// A command line's --secure: "on" (the defaults) or "cohort=N[,min=M][,degree=D][,threshold=T]
// [,timeout_ms=X][,adversarial=A][,dropout=P]" (SecureAggregation's max_cohort, min_cohort,
// degree, threshold, stage_timeout_ms, adversarial_rate, dropout_rate); empty or "none": not
// secure. INVALID_ARGUMENT for an unknown name or a value that is not a count (a rate: a
// number); the values are checked with the spec (ConfigFromProto).
absl::StatusOr<std::optional<v1::SecureAggregation>> ParseSecureAggregation(absl::string_view text);
// A command line's --privacy: "clip=C,z=Z[,clients=E][,quantile=Q[,lr=L][,count_stddev=S]]"
// (a quantile makes clipping adaptive; lr defaults to 0.2, count_stddev to 0.05 E); empty
// or "none": no privacy. INVALID_ARGUMENT for an unknown name or a value that is not a
// number; the values themselves are checked with the spec (ConfigFromProto).
absl::StatusOr<std::optional<v1::DifferentialPrivacy>> ParsePrivacy(absl::string_view text);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_SPEC_CONVERSION_H_
