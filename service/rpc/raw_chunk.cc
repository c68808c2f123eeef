// ReadRawChunk: the protobuf wire format of one Chunk request, read across gRPC slices.
#include "service/rpc/raw_chunk.h"

#include <utility>

namespace fedagg {
namespace {

constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;

// A forward reader over the bytes of several slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }

  size_t remaining() const { return remaining_; }
  void set_remaining(size_t bytes) { remaining_ = bytes; }

  bool ReadByte(uint8_t* out) {
    if (remaining_ == 0 || slice_ == slices_.size()) return false;
    *out = static_cast<uint8_t>(slices_[slice_].begin()[offset_]);
    Advance(1);
    return true;
  }
  // A varint of at most 10 bytes (protobuf's limit), as its low 64 bits.
  bool ReadVarint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;
  }
  // `bytes` bytes from here, as pieces of the slices.
  bool Take(size_t bytes, std::vector<absl::Span<const std::byte>>* pieces) {
    if (bytes > remaining_) return false;
    while (bytes > 0) {
      if (slice_ == slices_.size()) return false;
      const size_t n = std::min(bytes, slices_[slice_].size() - offset_);
      pieces->emplace_back(reinterpret_cast<const std::byte*>(slices_[slice_].begin()) + offset_, n);
      Advance(n);
      bytes -= n;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    remaining_ -= n;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t remaining_ = SIZE_MAX;
};

}  // namespace

std::optional<RawChunk> ReadRawChunk(const grpc::ByteBuffer& buffer, uint32_t chunk_field) {
  RawChunk chunk;
  if (!buffer.Dump(&chunk.slices).ok()) return std::nullopt;
  SliceReader reader(chunk.slices);
  reader.set_remaining(buffer.Length());
  // The request: one length-delimited field, the chunk, and nothing after it.
  uint64_t tag = 0, length = 0;
  if (!reader.ReadVarint(&tag) || tag != ((uint64_t{chunk_field} << 3) | kLengthDelimited)) return std::nullopt;
  if (!reader.ReadVarint(&length) || length != reader.remaining()) return std::nullopt;
  // The chunk: known fields of the expected wire types, each at most once.
  bool seen[5] = {};
  while (reader.remaining() > 0) {
    if (!reader.ReadVarint(&tag)) return std::nullopt;
    const uint64_t number = tag >> 3;
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (number < 1 || number > 4 || seen[number]) return std::nullopt;
    seen[number] = true;
    if (number == 4) {
      if (wire_type != kLengthDelimited || !reader.ReadVarint(&length) ||
          !reader.Take(static_cast<size_t>(length), &chunk.data)) {
        return std::nullopt;
      }
      chunk.data_bytes = static_cast<size_t>(length);
      continue;
    }
    uint64_t value = 0;
    if (wire_type != kVarint || !reader.ReadVarint(&value)) return std::nullopt;
    // As protobuf reads them: uint32 and enum (int32) keep the low 32 bits.
    if (number == 1) chunk.field = static_cast<uint32_t>(value);
    if (number == 2) chunk.section = static_cast<int32_t>(static_cast<uint32_t>(value));
    if (number == 3) chunk.offset = value;
  }
  return chunk;
}

}  // namespace fedagg
