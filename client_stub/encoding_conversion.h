// From the encoding a caller holds a field in to the one its intrinsic declares, so that
// sparse is transparent to the caller: a dense array, a sparse COO pair (int64 linear
// indices + one value each) or a row-sparse pair (int64 row ids + one row each) may be
// given for any field, and the client sends what the field takes. The rules are the
// Python client's (client_stub/python/src/fedagg/update_input.py), so one input means the
// same in both:
//   - dense → sparse COO: the non-zero elements, in row-major order (a zero, −0 included,
//     is "not touched" for the means and counts; to send an explicit zero, pass indices);
//   - dense → row-sparse: the rows that hold a non-zero element, ascending;
//   - sparse COO or row-sparse → dense: scattered into zeros, repeats adding up in the
//     order given;
//   - row-sparse → sparse COO: every element of each row, explicit zeros included;
//   - sparse COO → row-sparse: the rows the indices fall in, ascending, each zero where no
//     index falls and repeats adding up.
// Values keep the caller's dtype (casting to the declared dtype is dtype_cast.h's), and
// additions are in it: integers wrap, float16 and bfloat16 round after each addition.
#ifndef FEDAGG_CLIENT_STUB_ENCODING_CONVERSION_H_
#define FEDAGG_CLIENT_STUB_ENCODING_CONVERSION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/aggregate_result.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

// One field's value, owned, in one encoding; `values` is flat, in the caller's dtype.
struct EncodedField {
  Encoding encoding = Encoding::kDense;
  std::vector<int64_t> indices;  // empty for dense
  Tensor values;

  FieldValue view() const;
};

// `input` in `field`'s declared encoding (a copy, also when it is in it already).
// INVALID_ARGUMENT, worded as the server words a field's refusal, when the input is not a
// well-formed value of its own encoding for this field: a dense value of another element
// count, indices and values of different counts, an index or row id out of range, rows
// for a scalar field.
absl::StatusOr<EncodedField> ToDeclaredEncoding(const FieldSpec& field, const FieldValue& input);

// A floating-point `input` of `field`, in the field's declared encoding, with its values
// written in the field's value encoding (quantized or discretized; value_encoder.h),
// rounding with the random `stream`; a sparse field's indices are kept as they are.
// INVALID_ARGUMENT as the encoder refuses (a NaN or Inf value, an integer beyond a
// discretized field's range), or for input that is not floating-point values in the
// declared encoding.
absl::StatusOr<EncodedField> ToDeclaredValueEncoding(const FieldSpec& field, const FieldValue& input,
                                                     uint64_t stream);

// A whole update with every field in its declared encoding and value encoding: fields
// already in them are viewed where the caller holds them, the others converted by
// ToDeclaredEncoding and, for an encoded field, ToDeclaredValueEncoding, and held here.
// The view is valid while this object and the caller's arrays live.
class ConvertedUpdate {
 public:
  // Fails as ToDeclaredEncoding and ToDeclaredValueEncoding do, for the first field they
  // fail on. An update with the wrong number of fields is passed through for validation
  // to refuse. A differentially private update with discretized fields is clipped first,
  // as a client must before discretizing (update_clipping.h, ClientClipFactor). Encoded fields are given plain (in any floating dtype) and rounded with
  // field i's RoundingStream(seed, i); no seed: a random one for this update. A fixed
  // seed is for reproducing bytes: clients that share one round alike, so their rounding
  // errors no longer average out.
  static absl::StatusOr<ConvertedUpdate> Of(const ReductionSpec& spec, const UpdateView& update,
                                            std::optional<uint64_t> seed = std::nullopt);

  // Movable (the converted fields' buffers move with it), not copyable (a copy's view
  // would point into the original).
  ConvertedUpdate(ConvertedUpdate&&) = default;
  ConvertedUpdate& operator=(ConvertedUpdate&&) = default;
  ConvertedUpdate(const ConvertedUpdate&) = delete;
  ConvertedUpdate& operator=(const ConvertedUpdate&) = delete;

  const UpdateView& view() const { return view_; }

 private:
  ConvertedUpdate() = default;
  // A private update with discretized fields (ClientClipFactor): every field in its
  // declared form, scaled to the client's bound; empty for any other update.
  static absl::StatusOr<std::vector<EncodedField>> ClippedByTheClient(const ReductionSpec& spec,
                                                                     const UpdateView& update);

  std::vector<EncodedField> converted_;  // the fields that needed converting
  UpdateView view_;
};

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_ENCODING_CONVERSION_H_
