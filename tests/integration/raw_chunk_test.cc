// ReadRawChunk against the protobuf parser: a chunk read in place carries the same field,
// section, offset and payload as the parsed one, across any split into slices; every
// encoding outside the plain shape is left to the parser (nullopt).
#include "service/rpc/raw_chunk.h"

#include <string>
#include <vector>

#include "fedagg/v1/aggregation.pb.h"
#include "gtest/gtest.h"

namespace fedagg::testing {
namespace {

// `bytes` as a byte buffer of slices cut at `cuts` (ascending offsets).
grpc::ByteBuffer BufferOf(const std::string& bytes, const std::vector<size_t>& cuts = {}) {
  std::vector<grpc::Slice> slices;
  size_t begin = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + begin, cut - begin);
    begin = cut;
  }
  slices.emplace_back(bytes.data() + begin, bytes.size() - begin);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Payload(const RawChunk& chunk) {
  std::string out;
  for (absl::Span<const std::byte> piece : chunk.data) out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  return out;
}

v1::ContributeRequest ChunkOf(uint32_t field, v1::Section section, uint64_t offset, std::string data) {
  v1::ContributeRequest request;
  request.mutable_chunk()->set_field(field);
  request.mutable_chunk()->set_section(section);
  request.mutable_chunk()->set_offset(offset);
  request.mutable_chunk()->set_data(std::move(data));
  return request;
}

TEST(RawChunkTest, ReadsWhatTheParserReadsAcrossAnySplit) {
  std::string data(3000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  const std::string wire = ChunkOf(7, v1::INDICES, uint64_t{1} << 40, data).SerializeAsString();
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {}, {1}, {2, 3, 4, 5}, {wire.size() / 2}, {10, 11, 2000, wire.size() - 1}}) {
    std::optional<RawChunk> chunk = ReadRawChunk(BufferOf(wire, cuts), v1::ContributeRequest::kChunkFieldNumber);
    ASSERT_TRUE(chunk.has_value()) << cuts.size();
    EXPECT_EQ(chunk->field, 7u);
    EXPECT_EQ(chunk->section, v1::INDICES);
    EXPECT_EQ(chunk->offset, uint64_t{1} << 40);
    EXPECT_EQ(chunk->data_bytes, data.size());
    EXPECT_EQ(Payload(*chunk), data);
  }
}

TEST(RawChunkTest, DefaultsAndOutOfRangeValuesAreReadAsTheParserReadsThem) {
  const std::string empty = ChunkOf(0, v1::SECTION_UNSPECIFIED, 0, "").SerializeAsString();
  std::optional<RawChunk> chunk = ReadRawChunk(BufferOf(empty), v1::ContributeRequest::kChunkFieldNumber);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->field, 0u);
  EXPECT_EQ(chunk->section, 0);
  EXPECT_EQ(chunk->data_bytes, 0u);
  // An unknown, negative section value (an open enum keeps it).
  v1::ContributeRequest odd = ChunkOf(1, static_cast<v1::Section>(-5), 3, "x");
  const std::string wire = odd.SerializeAsString();
  chunk = ReadRawChunk(BufferOf(wire), v1::ContributeRequest::kChunkFieldNumber);
  ASSERT_TRUE(chunk.has_value());
  v1::ContributeRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(chunk->section, static_cast<int32_t>(parsed.chunk().section()));
  EXPECT_EQ(chunk->section, -5);
}

TEST(RawChunkTest, TheSubmitRequestsChunkFieldIsItsOwn) {
  v1::SubmitRequest submit;
  submit.mutable_chunk()->set_data("abc");
  const std::string wire = submit.SerializeAsString();
  EXPECT_TRUE(ReadRawChunk(BufferOf(wire), v1::SubmitRequest::kChunkFieldNumber).has_value());
  EXPECT_FALSE(ReadRawChunk(BufferOf(wire), v1::ContributeRequest::kChunkFieldNumber).has_value());
}

TEST(RawChunkTest, AnythingButThePlainShapeIsLeftToTheParser) {
  const std::string plain = ChunkOf(1, v1::VALUES, 7, "abcd").SerializeAsString();
  const auto read = [](const std::string& wire) {
    return ReadRawChunk(BufferOf(wire), v1::ContributeRequest::kChunkFieldNumber).has_value();
  };
  ASSERT_TRUE(read(plain));
  v1::ContributeRequest end;
  end.mutable_end()->set_crc32c(1);
  EXPECT_FALSE(read(end.SerializeAsString()));                      // another kind of request
  EXPECT_FALSE(read(plain + end.SerializeAsString()));              // a second member after the chunk
  EXPECT_FALSE(read(plain + plain));                                // the chunk twice (protobuf merges)
  EXPECT_FALSE(read(plain.substr(0, plain.size() - 1)));            // truncated
  EXPECT_FALSE(read(""));                                           // empty request
  std::string unknown_field = plain;
  unknown_field[1] = static_cast<char>(unknown_field[1] + 2);       // inner length + 2 ...
  unknown_field += std::string("\x28\x01", 2);                      // ... for field 5 (varint 1)
  v1::ContributeRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(unknown_field));               // valid protobuf, unknown field
  EXPECT_FALSE(read(unknown_field));
  std::string repeated_offset = plain;
  repeated_offset[1] = static_cast<char>(repeated_offset[1] + 2);
  repeated_offset += std::string("\x18\x02", 2);                    // offset again
  ASSERT_TRUE(parsed.ParseFromString(repeated_offset));
  EXPECT_FALSE(read(repeated_offset));
  std::string wrong_wire_type = plain;
  wrong_wire_type[1] = static_cast<char>(wrong_wire_type[1] + 2);
  wrong_wire_type += std::string("\x1d\x00", 2);                    // offset as fixed32: not what the parser accepts
  EXPECT_FALSE(read(wrong_wire_type));
}

}  // namespace
}  // namespace fedagg::testing
