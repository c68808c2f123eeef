// The result of one field from its accumulated state, wherever that state was kept: the
// CPU accumulators report from their own arrays, a device backend's adapter from the
// arrays it copied out of the device (portable/portable_accumulator_factory.cc). One
// definition of every intrinsic's last step: means divided (in the accumulation
// precision, float64 for integer sums), the result dtype written, counts attached when
// the spec asked for them.
#ifndef FEDAGG_SERVICE_CORE_FIELD_REPORT_H_
#define FEDAGG_SERVICE_CORE_FIELD_REPORT_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/aggregate_result.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// Dense intrinsics: `acc` holds the field's elements; the mean divides by
// `contributions`, the weighted mean by `weight_sum`.
template <typename Acc>
ReportedField ReportDense(const FieldSpec& field, absl::Span<const Acc> acc, int64_t contributions,
                          double weight_sum);

// The dense-result sparse family: `acc` is the [rows, row_width] table; `counts` (per row,
// empty unless the field keeps them) divide the means, `weight_sums` (per row) the
// weighted mean. A row nobody touched has mean 0.
template <typename Acc>
ReportedField ReportScatter(const FieldSpec& field, absl::Span<const Acc> acc,
                            absl::Span<const int64_t> counts, absl::Span<const double> weight_sums);

// A field whose result is its state as kept (`field.result_is_state`; Acc is then the
// result dtype): the result tensor, its values written by `fill` — a device backend's copy
// straight out of the device, so the report holds no host copy of the state beside it.
template <typename Acc>
absl::StatusOr<ReportedField> ReportStateValues(const FieldSpec& field,
                                                absl::FunctionRef<absl::Status(absl::Span<Acc>)> fill);

// At most the host bytes a report of an aggregate of `spec` allocates: for each field its
// result (values, and indices and counts where it has them; sparse_sum_sparse as if every
// coordinate were held) and, unless the result is the state as kept, the copy of the
// state a device backend reports from (values; per-row counts and weight sums where the
// field keeps them).
uint64_t ReportHostBytes(const ReductionSpec& spec);

// sparse_sum_sparse: the coalesced state in pieces whose indices increase from one piece
// to the next (the CPU accumulator's shards, or one piece).
template <typename Acc>
struct UnionPiece {
  absl::Span<const int64_t> indices;  // strictly increasing
  absl::Span<const Acc> values;
  absl::Span<const int64_t> counts;
};
template <typename Acc>
ReportedField ReportUnion(const FieldSpec& field, absl::Span<const UnionPiece<Acc>> pieces);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_FIELD_REPORT_H_
