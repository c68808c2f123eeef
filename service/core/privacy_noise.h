// Privacy noise: what the root does, once, to the result of a differentially private
// aggregation when it finalizes — every coordinate of every field's sum is snapped to a
// grid of step g (a power of two near sigma / 2^26) and moved by g times a discrete
// Gaussian integer of variance ceil((sigma / g)^2), so the noise's standard deviation is
// sigma = z C or a hair above it (reported); a private mean's noised sum is then divided by
// the expected clients; with adaptive clipping the centred count of unclipped updates is
// noised the same way and gives the next round's bound. All of it is a function of the
// partial's result and the noise key: the same key gives the same noised result.
#ifndef FEDAGG_SERVICE_CORE_PRIVACY_NOISE_H_
#define FEDAGG_SERVICE_CORE_PRIVACY_NOISE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "service/core/aggregate_result.h"
#include "service/core/keyed_random.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// Noises `result`, the report of `spec`'s partial aggregate (every field a sum: private
// means are run as sums), in place, and sets result.privacy. `clipped_updates`: the
// partial's. FAILED_PRECONDITION when a sum is too large for the grid (beyond 2^52 steps,
// which no clipped sum of fewer than 2^25 z clients reaches).
absl::Status AddPrivacyNoise(const ReductionSpec& spec, const NoiseKey& key, int64_t clipped_updates,
                             AggregateResult& result);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_PRIVACY_NOISE_H_
