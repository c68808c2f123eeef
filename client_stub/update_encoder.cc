// Update encoding: header, chunks, end.
#include "client_stub/update_encoder.h"

#include <algorithm>

#include "service/core/crc32c.h"

namespace fedagg {

bool EncodeUpdate(const std::string& aggregation_id, const std::string& client_id,
                  const UpdateView& update, size_t chunk_bytes, const EncodedUpdateSink& sink) {
  v1::UpdateHeader header;
  header.set_aggregation_id(aggregation_id);
  header.set_client_id(client_id);
  if (update.weight.has_value()) header.set_weight(*update.weight);
  for (const FieldValue& field : update.fields) {
    v1::FieldLayout* layout = header.add_fields();
    layout->set_nnz(field.encoding == Encoding::kDense ? 0 : static_cast<int64_t>(field.indices.size()));
    layout->set_dtype(static_cast<v1::DType>(static_cast<int>(field.dtype)));
  }
  if (!sink.header(header)) return false;
  uint32_t crc = 0;
  for (size_t f = 0; f < update.fields.size(); ++f) {
    const FieldValue& field = update.fields[f];
    const absl::Span<const std::byte> sections[2] = {AsBytes(field.indices), field.values};
    for (int s = 0; s < 2; ++s) {
      const absl::Span<const std::byte> bytes = sections[s];
      crc = Crc32cExtend(crc, bytes.data(), bytes.size());
      for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
        v1::Chunk chunk;
        chunk.set_field(static_cast<uint32_t>(f));
        chunk.set_section(s == 0 ? v1::INDICES : v1::VALUES);
        chunk.set_offset(offset);
        const size_t n = std::min(chunk_bytes, bytes.size() - offset);
        chunk.set_data(reinterpret_cast<const char*>(bytes.data() + offset), n);
        if (!sink.chunk(chunk)) return false;
      }
    }
  }
  v1::UpdateEnd end;
  end.set_crc32c(crc);
  return sink.end(end);
}

}  // namespace fedagg
