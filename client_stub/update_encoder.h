// Encodes one update as the messages of the fedagg.v1 protocol, one message at a time:
// an UpdateHeader (with every field's nnz), Chunks of at most `chunk_bytes` per section in
// wire order (field 0 indices, field 0 values, field 1 ...), and an UpdateEnd with the
// CRC-32C of it all. Callers pull the next piece when they are ready to write it, so a
// blocking writer (ContributeStream, SubmitUpdate) and an asynchronous one (the load
// generator's reactors) share the same encoding and hold one chunk at a time.
#ifndef FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_
#define FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "fedagg/v1/aggregation.pb.h"
#include "service/core/field_value.h"

namespace fedagg {

class UpdateEncoder {
 public:
  // `client_id` goes into the header when not empty (Submit names the client there;
  // Contribute names it in Hello). `update` must outlive the encoder.
  UpdateEncoder(std::string aggregation_id, std::string client_id, const UpdateView& update,
                size_t chunk_bytes);

  // True once the UpdateEnd has been produced.
  bool done() const { return stage_ == Stage::kDone; }
  // Messages of the whole update (header + chunks + end) and how many were produced.
  int64_t total_pieces() const { return total_pieces_; }
  int64_t pieces_produced() const { return pieces_produced_; }

  // Sets the next piece on `request` (a ContributeRequest or a SubmitRequest: both have
  // the header / chunk / end oneof) and advances. Must not be called once done().
  template <typename Request>
  void Next(Request& request) {
    switch (stage_) {
      case Stage::kHeader: FillHeader(*request.mutable_header()); break;
      case Stage::kChunks: FillChunk(*request.mutable_chunk()); break;
      case Stage::kEnd: FillEnd(*request.mutable_end()); break;
      case Stage::kDone: break;
    }
  }

 private:
  enum class Stage { kHeader, kChunks, kEnd, kDone };
  absl::Span<const std::byte> Section(size_t index) const;  // index = 2 * field + (0 indices | 1 values)
  void SkipEmptySections();
  void FillHeader(v1::UpdateHeader& header);
  void FillChunk(v1::Chunk& chunk);
  void FillEnd(v1::UpdateEnd& end);

  std::string aggregation_id_;
  std::string client_id_;
  const UpdateView& update_;
  size_t chunk_bytes_;
  Stage stage_ = Stage::kHeader;
  size_t section_ = 0;  // current section, 2 * field + part
  size_t offset_ = 0;   // bytes of the current section already produced
  uint32_t crc_ = 0;
  int64_t total_pieces_ = 0;
  int64_t pieces_produced_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_
