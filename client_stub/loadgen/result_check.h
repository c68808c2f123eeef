// Checks an aggregation's result against the value the load generator expects from what
// it sent: the float64 reference over the generated updates, each counted as many times as
// clients that sent it were counted. Integer results must match exactly; floating results
// within the rounding bound of summing n positive values (n ulps of the accumulation
// dtype, twice for weighted fields, none for max and min, plus two of the result dtype,
// and for a quantized field the roundings of decoding: 16 ulps, or 4 a coordinate of a
// block when rotated),
// relative.
// With differential privacy: the reference is over the updates clipped as the server clips
// them, the clipped count must be the server's, and each field's noise (the result times
// its divisor, less the reference sum) must have mean 0 and the reported standard
// deviation, each within six standard errors (a false alarm below 1e-8); without noise
// (z = 0) the rounding bound above holds.
#ifndef FEDAGG_CLIENT_STUB_LOADGEN_RESULT_CHECK_H_
#define FEDAGG_CLIENT_STUB_LOADGEN_RESULT_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "client_stub/loadgen/workload.h"
#include "service/core/aggregate_result.h"
#include "service/core/reduction_spec.h"

namespace fedagg::loadgen {

struct FieldCheck {
  std::string path;
  double max_relative_error = 0;  // infinity: shapes, indices or counts differ
  double tolerance = 0;
  // Differential privacy with noise: the noise's measured standard deviation over the
  // field's coordinates, and the one the server reported (max_relative_error is then
  // |measured / reported - 1| and tolerance its bound).
  double measured_noise_stddev = -1;
  double reported_noise_stddev = -1;
  bool passed = false;
};

struct CheckReport {
  bool passed = false;
  int64_t expected_contributions = 0;
  int64_t contributions = 0;
  std::vector<FieldCheck> fields;
};

CheckReport CheckResult(const ReductionSpec& spec, absl::Span<const GeneratedUpdate> pool,
                        absl::Span<const int64_t> counted_per_update, const AggregateResult& result);

}  // namespace fedagg::loadgen

#endif  // FEDAGG_CLIENT_STUB_LOADGEN_RESULT_CHECK_H_
