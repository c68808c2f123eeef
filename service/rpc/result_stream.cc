// ResultStream: an AggregateResult as a sequence of ResultChunk messages.
#include "service/rpc/result_stream.h"

#include "service/core/field_value.h"
#include "service/rounds/spec_conversion.h"

namespace fedagg {

ResultStream::ResultStream(std::shared_ptr<const AggregateResult> result,
                           v1::AggregationStatus status)
    : result_(std::move(result)), status_(std::move(status)) {}

absl::Span<const std::byte> ResultStream::PartBytes(const AggregateResult& result, size_t field, int part) {
  const ReportedField& reported = result.fields[field];
  switch (part) {
    case v1::ResultChunk::VALUES:
      return absl::MakeConstSpan(reported.value.bytes);
    case v1::ResultChunk::INDICES:
      return AsBytes(absl::MakeConstSpan(reported.indices));
    default:
      return AsBytes(absl::MakeConstSpan(reported.counts));
  }
}

std::optional<v1::ResultChunk> ResultStream::Next() {
  v1::ResultChunk chunk;
  if (!header_sent_) {
    header_sent_ = true;
    *chunk.mutable_status() = status_;
    for (const ReportedField& field : result_->fields) {
      auto* header = chunk.add_fields();
      header->set_path(field.path);
      header->set_intrinsic(static_cast<v1::Intrinsic>(static_cast<int>(field.intrinsic)));
      v1::Tensor* value = header->mutable_value();
      value->set_dtype(DTypeToProto(field.value.dtype));
      for (int64_t d : field.value.shape) value->add_shape(d);
      header->set_nnz(static_cast<int64_t>(field.indices.size()));
      header->set_has_counts(field.has_counts);
    }
    return chunk;
  }
  // Skip to the next non-empty part.
  while (field_ < result_->fields.size()) {
    absl::Span<const std::byte> bytes = PartBytes(*result_, field_, part_);
    if (offset_ < bytes.size()) {
      const size_t n = std::min(kChunkBytes, bytes.size() - offset_);
      chunk.set_field(static_cast<uint32_t>(field_));
      chunk.set_part(static_cast<v1::ResultChunk::Part>(part_));
      chunk.set_offset(offset_);
      chunk.set_data(reinterpret_cast<const char*>(bytes.data() + offset_), n);
      offset_ += n;
      return chunk;
    }
    offset_ = 0;
    if (++part_ > v1::ResultChunk::COUNTS) {
      part_ = v1::ResultChunk::VALUES;
      ++field_;
    }
  }
  return std::nullopt;
}

}  // namespace fedagg
