// Update encoding: header, chunks, end, one piece at a time.
#include "client_stub/update_encoder.h"

#include <algorithm>
#include <utility>

#include "service/core/crc32c.h"

namespace fedagg {

UpdateEncoder::UpdateEncoder(std::string aggregation_id, std::string client_id, const UpdateView& update,
                             size_t chunk_bytes)
    : aggregation_id_(std::move(aggregation_id)),
      client_id_(std::move(client_id)),
      update_(update),
      chunk_bytes_(std::max<size_t>(chunk_bytes, 1)) {
  total_pieces_ = 2;  // header and end
  for (size_t s = 0; s < 2 * update_.fields.size(); ++s) {
    total_pieces_ += static_cast<int64_t>((Section(s).size() + chunk_bytes_ - 1) / chunk_bytes_);
  }
}

absl::Span<const std::byte> UpdateEncoder::Section(size_t index) const {
  const FieldValue& field = update_.fields[index / 2];
  return index % 2 == 0 ? AsBytes(field.indices) : field.values;
}

void UpdateEncoder::SkipEmptySections() {
  while (section_ < 2 * update_.fields.size() && offset_ >= Section(section_).size()) {
    ++section_;
    offset_ = 0;
  }
  if (section_ == 2 * update_.fields.size()) stage_ = Stage::kEnd;
}

void UpdateEncoder::FillHeader(v1::UpdateHeader& header) {
  header.Clear();
  header.set_aggregation_id(aggregation_id_);
  if (!client_id_.empty()) header.set_client_id(client_id_);
  if (update_.weight.has_value()) header.set_weight(*update_.weight);
  for (const FieldValue& field : update_.fields) {
    v1::FieldLayout* layout = header.add_fields();
    layout->set_nnz(field.encoding == Encoding::kDense ? 0 : static_cast<int64_t>(field.indices.size()));
    layout->set_dtype(static_cast<v1::DType>(static_cast<int>(field.dtype)));
  }
  stage_ = Stage::kChunks;
  ++pieces_produced_;
  SkipEmptySections();
}

void UpdateEncoder::FillChunk(v1::Chunk& chunk) {
  const absl::Span<const std::byte> bytes = Section(section_);
  if (offset_ == 0) crc_ = Crc32cExtend(crc_, bytes.data(), bytes.size());
  const size_t n = std::min(chunk_bytes_, bytes.size() - offset_);
  chunk.set_field(static_cast<uint32_t>(section_ / 2));
  chunk.set_section(section_ % 2 == 0 ? v1::INDICES : v1::VALUES);
  chunk.set_offset(offset_);
  chunk.set_data(reinterpret_cast<const char*>(bytes.data() + offset_), n);
  offset_ += n;
  ++pieces_produced_;
  SkipEmptySections();
}

void UpdateEncoder::FillEnd(v1::UpdateEnd& end) {
  end.set_crc32c(crc_);
  stage_ = Stage::kDone;
  ++pieces_produced_;
}

}  // namespace fedagg
