// DecodingFieldAccumulator: the accumulator of a sparse-family field whose values arrive
// quantized or discretized (value_encoding.h). Its indices stay exact and go through
// untouched; its values, a third or less of what a sparse update carries (each entry's
// 8-byte index is the bulk), are decoded on the host, a bounded run of updates at a time
// (into memory held during the call only), into plain values of the accumulation dtype (a
// discretized field's int64 integer steps, which then sum exactly), rotated back per
// update where the field is rotated, and handed to the backend's own accumulator for the
// field as if they had arrived plain (DecodedFieldSpec). A dense field's encoded values are decoded inside the
// backends' kernels instead (cpu_decode_kernels.h, portable/thrust_reducer_functors.h).
// The state, its format and merging are the backend accumulator's; the report scales a
// discretized field's integer result into the field's result dtype.
#ifndef FEDAGG_SERVICE_CORE_DECODING_FIELD_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_DECODING_FIELD_ACCUMULATOR_H_

#include <cstdint>
#include <memory>

#include "service/core/accumulator_factory.h"
#include "service/core/field_accumulator.h"

namespace fedagg {

class DecodingFieldAccumulator final : public FieldAccumulator {
 public:
  // The decoded values of one run of updates take at most this many bytes (a single
  // update's may take more, and then go alone).
  static constexpr uint64_t kMaxDecodedBytes = uint64_t{64} << 20;

  // `field` (which must outlive it) is a sparse-family field with a value encoding.
  DecodingFieldAccumulator(const FieldSpec& field, const AccumulatorFactory& backend,
                           uint64_t max_decoded_bytes = kMaxDecodedBytes);

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values, absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

 private:
  const FieldSpec& field_;
  const uint64_t max_decoded_bytes_;
  const FieldSpec decoded_field_;  // before backend_accumulator_, which refers to it
  std::unique_ptr<FieldAccumulator> backend_accumulator_;
};

// The accumulator `backend` reduces `field` with: its own, or for a sparse-family field
// with encoded values, a DecodingFieldAccumulator in front of it.
std::unique_ptr<FieldAccumulator> MakeFieldAccumulator(const FieldSpec& field, const AccumulatorFactory& backend);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_DECODING_FIELD_ACCUMULATOR_H_
