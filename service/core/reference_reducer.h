// A deliberately simple reference for every intrinsic: loops over updates one by one in
// float64, no batching, no threads. Tests, the demo and the benchmarks check the real
// reduction against it. Its output is the expected result of one field.
#ifndef FEDAGG_SERVICE_CORE_REFERENCE_REDUCER_H_
#define FEDAGG_SERVICE_CORE_REFERENCE_REDUCER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "service/core/aggregate_result.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

struct ReferenceField {
  std::vector<double> values;    // dense: every coordinate; sparse_sum_sparse: per index
  std::vector<int64_t> indices;  // sparse_sum_sparse only
  std::vector<int64_t> counts;   // contributors per coordinate / row / index
};

// Expected result of every field for updates already known to be valid.
std::vector<ReferenceField> ReferenceReduce(const ReductionSpec& spec,
                                            absl::Span<const UpdateView> updates);
// The same as if updates[u] were repeated multiplicities[u] times (0: left out), without
// the repetition's cost: for checks of many clients that send one of a few distinct updates.
std::vector<ReferenceField> ReferenceReduce(const ReductionSpec& spec, absl::Span<const UpdateView> updates,
                                            absl::Span<const int64_t> multiplicities);

// Largest |actual - expected| / max(1, |expected|) over all coordinates of all fields;
// infinity when shapes, indices or counts differ (counts only where reported).
double MaxRelativeError(const std::vector<ReferenceField>& expected, const AggregateResult& actual);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_REFERENCE_REDUCER_H_
