// DecodingFieldAccumulator: a sparse-family field's encoded values decoded in front of the
// backend's accumulator for it.
#include "service/core/decoding_field_accumulator.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "service/core/cpu_kernels.h"
#include "service/core/encoded_values.h"
#include "service/core/rotation.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

// The `n` values of one encoded section as plain values of Out. Quantized (Out float or
// double, the accumulation dtype): code q of block k is s_k * (q * step - 1), computed in
// Out's precision as the dense kernels compute it, or in float64 and then rotated back
// where the field is rotated. Discretized (Out int64): each integer as it is.
template <typename Out>
void DecodeSection(const ValueEncoding& encoding, absl::Span<const std::byte> section, int64_t n, Out* out) {
  const EncodedValues encoded(encoding, section, n);
  if constexpr (std::is_integral_v<Out>) {
    for (int64_t i = 0; i < n; ++i) out[i] = encoded.integer(i);
  } else if (encoding.rotated()) {
    std::vector<double> rotated(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rotated[static_cast<size_t>(i)] = encoded.Decode(i);
    Unrotate(encoding, absl::MakeSpan(rotated));
    std::copy(rotated.begin(), rotated.end(), out);
  } else {
    const Out step = static_cast<Out>(2.0 / encoding.MaxCode());
    for (int64_t k = 0; k < encoded.blocks(); ++k) {
      const Out scale = static_cast<Out>(encoded.scale(k));
      const int64_t last = std::min(n, (k + 1) * encoding.block_size);
      for (int64_t i = k * encoding.block_size; i < last; ++i) {
        out[i] = scale * (static_cast<Out>(encoded.code(i)) * step - Out{1});
      }
    }
  }
}

}  // namespace

DecodingFieldAccumulator::DecodingFieldAccumulator(const FieldSpec& field, const AccumulatorFactory& backend,
                                                   uint64_t max_decoded_bytes)
    : field_(field),
      max_decoded_bytes_(max_decoded_bytes),
      decoded_field_(DecodedFieldSpec(field)),
      backend_accumulator_(backend.Make(decoded_field_)) {}

absl::Status DecodingFieldAccumulator::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                       absl::Span<const double> weights) {
  const uint64_t width = static_cast<uint64_t>(field_.row_width);
  const DType dtype = decoded_field_.type.dtype;
  const uint64_t element = DTypeSize(dtype);
  const auto decoded_bytes = [&](size_t i) { return values[i]->indices.size() * width * element; };
  std::vector<uint64_t> storage;  // one run's decoded values (8-byte aligned for any dtype), for this call only
  std::vector<FieldValue> decoded;
  std::vector<const FieldValue*> run;
  for (size_t first = 0; first < values.size();) {
    size_t last = first + 1;
    uint64_t bytes = decoded_bytes(first);
    while (last < values.size() && bytes + decoded_bytes(last) <= max_decoded_bytes_) bytes += decoded_bytes(last++);
    storage.resize((bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t));
    std::byte* at = reinterpret_cast<std::byte*>(storage.data());
    decoded.clear();
    for (size_t i = first; i < last; ++i) {
      const FieldValue& value = *values[i];
      const int64_t n = static_cast<int64_t>(value.indices.size() * width);
      cpu::DispatchDType(dtype, [&](auto tag) {
        using Out = typename decltype(tag)::type;
        if constexpr (std::is_same_v<Out, float> || std::is_same_v<Out, double> || std::is_same_v<Out, int64_t>) {
          DecodeSection(field_.value_encoding, value.values, n, reinterpret_cast<Out*>(at));
        }
      });
      const size_t size = decoded_bytes(i);
      decoded.push_back(FieldValue{value.encoding, dtype, value.indices, absl::MakeConstSpan(at, size), value.ascending});
      at += size;
    }
    run.clear();
    for (const FieldValue& value : decoded) run.push_back(&value);
    FEDAGG_RETURN_IF_ERROR(backend_accumulator_->AccumulateBatch(run, weights.subspan(first, last - first)));
    first = last;
  }
  return absl::OkStatus();
}

absl::Status DecodingFieldAccumulator::MergeWith(const FieldAccumulator& other) {
  return backend_accumulator_->MergeWith(*static_cast<const DecodingFieldAccumulator&>(other).backend_accumulator_);
}

absl::Status DecodingFieldAccumulator::SerializeTo(ByteWriter& out) const {
  return backend_accumulator_->SerializeTo(out);
}

absl::Status DecodingFieldAccumulator::DeserializeFrom(ByteReader& in, int64_t contributions) {
  return backend_accumulator_->DeserializeFrom(in, contributions);
}

absl::StatusOr<ReportedField> DecodingFieldAccumulator::Report(int64_t contributions, double weight_sum) const {
  FEDAGG_ASSIGN_OR_RETURN(ReportedField report, backend_accumulator_->Report(contributions, weight_sum));
  if (!field_.value_encoding.discretized()) return report;
  // Integer steps (an int64 sum, or a float64 mean of them) times the scale, in float64,
  // written in the field's result dtype, as a dense discretized field's are.
  const size_t n = report.value.bytes.size() / DTypeSize(report.value.dtype);
  Tensor scaled{field_.result_dtype, report.value.shape, std::vector<std::byte>(n * DTypeSize(field_.result_dtype))};
  cpu::DispatchDType(field_.result_dtype, [&](auto tag) {
    using Out = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Out>) {
      const absl::Span<Out> dst = scaled.mutable_values<Out>();
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<Out>(report.value.ValueAsDouble(i) * field_.value_encoding.scale);
    }
  });
  report.value = std::move(scaled);
  return report;
}

uint64_t DecodingFieldAccumulator::MemoryBytes() const { return backend_accumulator_->MemoryBytes(); }

std::unique_ptr<FieldAccumulator> MakeFieldAccumulator(const FieldSpec& field, const AccumulatorFactory& backend) {
  if (IsSparseFamily(field.intrinsic) && field.value_encoding.encoded()) {
    return std::make_unique<DecodingFieldAccumulator>(field, backend);
  }
  return backend.Make(field);
}

}  // namespace fedagg
