// The result of one field from its accumulated state: every intrinsic's last step —
// means divided (DivisionOf: by what, in the accumulation precision, float64 for integer
// sums), the result dtype written, counts attached when the spec asked for them. The CPU
// accumulators report from their own arrays; a device backend's adapter
// (portable/portable_accumulator_factory.cc) has the device make a dense or scatter
// field's result by the same division (ReportWritten), and reports sparse_sum_sparse
// from the arrays it copied out of the device.
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

// How a dense or scatter field's result comes from its state: its values divided by
// nothing, by one divisor (a dense mean: the contributions or the weight sum; none when
// that is 0), or by their row's count or weight sum (the sparse family's means: a row
// whose divisor is 0 reports 0); the division in the accumulation precision, float64 for
// an integer state. ReportDense and ReportScatter follow it; a device backend passes it
// to the device, which makes the result where the state is.
struct ResultDivision {
  enum class By : uint8_t { kNothing, kScalar, kRowCount, kRowWeightSum };
  By by = By::kNothing;
  double scalar = 0;  // kScalar
};
ResultDivision DivisionOf(const FieldSpec& field, int64_t contributions, double weight_sum);

// A dense or scatter field's result made elsewhere (a device backend's, on the device):
// the result tensor, and the counts where the field reports them, allocated here and
// written by `write` — so the report holds no host copy of the state beside the result.
absl::StatusOr<ReportedField> ReportWritten(const FieldSpec& field,
                                            absl::FunctionRef<absl::Status(ReportedField&)> write);

// At most the host bytes a report of an aggregate of `spec` allocates: for each field its
// result (values, and indices and counts where it has them; sparse_sum_sparse as if every
// coordinate were held), and for sparse_sum_sparse the copy of the state a device backend
// reports from (its other fields' results are made on the device: ReportWritten).
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
