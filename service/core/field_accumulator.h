// FieldAccumulator: the running reduction of one leaf field of an aggregation — the
// interface a backend implements per field. A backend's AccumulatorFactory
// (accumulator_factory.h) makes the right one for a FieldSpec; the CPU backend's are in
// cpu_*_accumulator.h. Callers validate every value first (update_validator.h):
// accumulators trust their input. The calls return a Status because a device backend can
// fail where the CPU cannot (device out of memory: RESOURCE_EXHAUSTED; a lost device:
// INTERNAL or UNAVAILABLE); after such an error the accumulator's state is unspecified and
// the aggregation that owns it fails.
#ifndef FEDAGG_SERVICE_CORE_FIELD_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_FIELD_ACCUMULATOR_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/aggregate_result.h"
#include "service/core/byte_codec.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

class FieldAccumulator {
 public:
  virtual ~FieldAccumulator() = default;

  // Adds a batch of validated values, values[i] weighted by weights[i] (weights are 1
  // for unweighted specs). Fails only for lack of device resources.
  virtual absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                                       absl::Span<const double> weights) = 0;
  // Adds another accumulator of the same field spec, made by the same backend.
  virtual absl::Status MergeWith(const FieldAccumulator& other) = 0;
  // Appends the state in the format of docs/PARTIAL_AGGREGATE_FORMAT.md, which is the
  // same for every backend.
  virtual absl::Status SerializeTo(ByteWriter& out) const = 0;
  // Replaces the state with one read from `in`; DATA_LOSS when it is malformed or does not
  // fit the field. `contributions` bounds every per-coordinate count.
  virtual absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) = 0;
  // The field's result, given the aggregation's contribution count and weight sum (> 0).
  virtual absl::StatusOr<ReportedField> Report(int64_t contributions,
                                               double weight_sum) const = 0;
  // Bytes of heap memory the accumulator holds (for the node's memory budget).
  virtual uint64_t MemoryBytes() const = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_FIELD_ACCUMULATOR_H_
