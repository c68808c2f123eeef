// RawChunk: a Chunk request read straight from the gRPC byte buffer it arrived in, its
// payload left where gRPC received it, so that UpdateAssembler copies it once, into the
// update's buffer (checksumming it there), instead of protobuf first copying it into a
// string of its own. Only the plain shape — the request holds the chunk and nothing else,
// each of the chunk's fields at most once, no unknown fields — is read this way; any other
// encoding returns nullopt and goes through the protobuf parser, so both paths accept and
// refuse exactly the same requests.
#ifndef FEDAGG_SERVICE_RPC_RAW_CHUNK_H_
#define FEDAGG_SERVICE_RPC_RAW_CHUNK_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace fedagg {

struct RawChunk {
  uint32_t field = 0;
  int32_t section = 0;  // a v1::Section value, possibly unknown
  uint64_t offset = 0;
  // The payload, in order, as pieces of the slices below.
  std::vector<absl::Span<const std::byte>> data;
  size_t data_bytes = 0;
  std::vector<grpc::Slice> slices;  // keeps `data` alive
};

// Reads `buffer` as a request whose only field is the Chunk with field number
// `chunk_field` (ContributeRequest: 3, SubmitRequest: 2). Leaves `buffer` as it was.
std::optional<RawChunk> ReadRawChunk(const grpc::ByteBuffer& buffer, uint32_t chunk_field);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_RAW_CHUNK_H_
