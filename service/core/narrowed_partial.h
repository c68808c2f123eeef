// Partials sent up the tree in 16 bits (format version 3, docs/PARTIAL_AGGREGATE_FORMAT.md):
// a parent may ask its children for float16 or bfloat16 partials (--child_partial_dtype),
// halving what travels between aggregators. A field whose sums may be narrowed — a dense
// sum, mean or weighted mean accumulated in floating point, not summed exactly — is written
// as 16-bit values after its usual array header; a float16 field whose sums do not all fit
// float16's range (|x| <= 65504) is written in full instead, so nothing becomes infinite.
// Every other field, and every partial a checkpoint holds, keeps its full precision.
#ifndef FEDAGG_SERVICE_CORE_NARROWED_PARTIAL_H_
#define FEDAGG_SERVICE_CORE_NARROWED_PARTIAL_H_

#include "absl/status/status.h"
#include "service/core/byte_codec.h"
#include "service/core/dtype.h"
#include "service/core/field_accumulator.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// What a partial's floating sums travel in: kFull (their accumulation dtype), or 16 bits.
enum class PartialPrecision : uint8_t { kFull, kFloat16, kBFloat16 };

// Whether `field`'s state may travel in 16 bits.
bool Narrowable(const FieldSpec& field);

// Writes `accumulator`'s state (a field Narrowable says yes to) in `precision` (kFloat16
// or kBFloat16) into `out`: the 16-bit dtype and the 16-bit state, or the accumulation
// dtype and the full state when a sum does not fit.
absl::Status WriteNarrowable(const FieldSpec& field, const FieldAccumulator& accumulator,
                             PartialPrecision precision, ByteWriter& out);
// Reads what WriteNarrowable wrote into `accumulator`. DATA_LOSS for a dtype byte that is
// neither the accumulation dtype nor float16 / bfloat16, and as the accumulator's reader.
absl::Status ReadNarrowable(const FieldSpec& field, FieldAccumulator& accumulator, ByteReader& in,
                            int64_t contributions);

// Parses --child_partial_dtype's spelling: float32 (full), float16, bfloat16.
absl::StatusOr<PartialPrecision> ParsePartialPrecision(absl::string_view name);
// The dtype that names it on the wire (TierCommand.partial_dtype): kFloat32 for kFull.
DType PartialPrecisionDType(PartialPrecision precision);
PartialPrecision PartialPrecisionOf(DType dtype);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_NARROWED_PARTIAL_H_
