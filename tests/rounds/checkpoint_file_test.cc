// The checkpoint file: round trip (children's leases and the keys included), a version 1 file still
// read, torn writes and corruption refused, atomic replace (a file its owner alone reads).
#include "service/rounds/checkpoint_file.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/byte_codec.h"
#include "service/core/crc32c.h"
#include "service/core/read_file.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::CountingSpec;
using testing::TempDir;

AggregationCheckpoint SampleCheckpoint(const std::string& partial = "partial-bytes") {
  AggregationCheckpoint checkpoint;
  checkpoint.spec = CountingSpec("round-7");
  checkpoint.state = v1::SEALED;
  checkpoint.detail = "sealed by an operator";
  checkpoint.contributions = 12;
  checkpoint.weight_sum = 12.5;
  ClientIdSet counted;
  for (const char* client_id : {"alice", "bob", "", "carol", "dave"}) counted.insert(client_id);
  checkpoint.counted = counted.Snapshot();
  checkpoint.children = {{"edge-1@17", 4, false, false, {"carol", "dave"}},
                         {"edge-2@18", 9, true, false, {}},
                         {"edge-3@19", 2, false, true, {}}};
  checkpoint.partial = partial;
  checkpoint.noise_key = NoiseKey{};
  checkpoint.noise_key->bytes.fill(0x5a);
  checkpoint.secure_root_key.emplace();
  for (size_t i = 0; i < checkpoint.secure_root_key->size(); ++i) (*checkpoint.secure_root_key)[i] = static_cast<uint8_t>(i);
  return checkpoint;
}

void ExpectSame(const AggregationCheckpoint& a, const AggregationCheckpoint& b) {
  EXPECT_EQ(a.spec.SerializeAsString(), b.spec.SerializeAsString());
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.detail, b.detail);
  EXPECT_EQ(a.contributions, b.contributions);
  EXPECT_EQ(a.weight_sum, b.weight_sum);
  EXPECT_EQ(a.counted.ToVector(), b.counted.ToVector());
  ASSERT_EQ(a.children.size(), b.children.size());
  for (size_t i = 0; i < a.children.size(); ++i) {
    EXPECT_EQ(a.children[i].child_id, b.children[i].child_id);
    EXPECT_EQ(a.children[i].last_sequence, b.children[i].last_sequence);
    EXPECT_EQ(a.children[i].final_received, b.children[i].final_received);
    EXPECT_EQ(a.children[i].released, b.children[i].released);
    EXPECT_EQ(a.children[i].leased, b.children[i].leased);
  }
  EXPECT_EQ(a.partial, b.partial);
  ASSERT_EQ(a.noise_key.has_value(), b.noise_key.has_value());
  if (a.noise_key.has_value()) {
    EXPECT_EQ(a.noise_key->bytes, b.noise_key->bytes);
  }
  EXPECT_EQ(a.secure_root_key, b.secure_root_key);
}

TEST(CheckpointFileTest, RoundTrip) {
  const AggregationCheckpoint checkpoint = SampleCheckpoint(std::string("partial\0bytes", 13));
  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(EncodeCheckpoint(checkpoint));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(checkpoint, *decoded);
  // Without the keys, none comes back.
  AggregationCheckpoint keyless = checkpoint;
  keyless.noise_key.reset();
  keyless.secure_root_key.reset();
  decoded = DecodeCheckpoint(EncodeCheckpoint(keyless));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(keyless, *decoded);
}

// The counted ids of a set that erased some, and counted one of them again, are written
// as the set holds them: each id once, the count matching.
TEST(CheckpointFileTest, CountedIdsAfterErasuresRoundTrip) {
  AggregationCheckpoint checkpoint = SampleCheckpoint();
  ClientIdSet counted;
  for (int i = 0; i < 3000; ++i) counted.insert(absl::StrCat("client-", i));
  for (int i = 0; i < 3000; i += 3) counted.erase(absl::StrCat("client-", i));
  counted.insert("client-0");
  checkpoint.counted = counted.Snapshot();
  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(EncodeCheckpoint(checkpoint));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->counted.size(), 2001u);
  EXPECT_EQ(decoded->counted.ToVector(), counted.Snapshot().ToVector());
}

TEST(CheckpointFileTest, EveryTornPrefixIsRefused) {
  const std::string bytes = EncodeCheckpoint(SampleCheckpoint());
  for (size_t length = 0; length < bytes.size(); ++length) {
    absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(absl::string_view(bytes).substr(0, length));
    ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << "prefix of " << length << " bytes";
  }
  // Bytes appended to a whole file are refused too.
  EXPECT_EQ(DecodeCheckpoint(bytes + "x").status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointFileTest, EveryFlippedByteIsRefused) {
  const std::string bytes = EncodeCheckpoint(SampleCheckpoint());
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i >= 8 && i < 12) continue;  // the format version: its own error, below
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x40);
    absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(corrupt);
    ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << "byte " << i << ": " << decoded.status();
  }
  std::string newer = bytes;
  newer[8] = static_cast<char>(kCheckpointFormatVersion + 1);
  EXPECT_EQ(DecodeCheckpoint(newer).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A checkpoint file of format version 1 (before children's leases) counting `counted`,
// with one child that pushed up to sequence 5, its final push among them.
std::string VersionOneFile(const std::vector<std::string>& counted) {
  ByteWriter body;
  body.PutString(CountingSpec("round-1").SerializeAsString());
  body.Put<int32_t>(v1::OPEN);
  body.PutString("");
  body.Put<int64_t>(3);
  body.Put<double>(3.0);
  body.Put<uint64_t>(counted.size());
  for (const std::string& client_id : counted) body.PutString(client_id);
  body.Put<uint64_t>(1);
  body.PutString("edge-1@17");
  body.Put<uint64_t>(5);
  body.Put<uint8_t>(1);
  body.PutString("partial");
  const std::string payload = body.Take();
  ByteWriter file;
  file.PutElements("FEDAGGCK", 8);
  file.Put<uint32_t>(1);
  file.Put<uint32_t>(Crc32cExtend(0, payload.data(), payload.size()));
  file.Put<uint64_t>(payload.size());
  return file.Take() + payload;
}

// A file written before children's leases existed (format version 1) is read: its children
// hold no leases and none was given up.
TEST(CheckpointFileTest, AVersionOneFileIsReadWithoutLeases) {
  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(VersionOneFile({"alice"}));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->counted.ToVector(), std::vector<std::string>{"alice"});
  ASSERT_EQ(decoded->children.size(), 1u);
  EXPECT_EQ(decoded->children[0].last_sequence, 5u);
  EXPECT_TRUE(decoded->children[0].final_received);
  EXPECT_FALSE(decoded->children[0].released);
  EXPECT_TRUE(decoded->children[0].leased.empty());
  EXPECT_EQ(decoded->partial, "partial");
}

// Counted ids are a set: a file that lists one twice (with a good checksum) is not one
// fedagg wrote, and is refused like any other corrupt file.
TEST(CheckpointFileTest, AClientCountedTwiceIsRefused) {
  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(VersionOneFile({"alice", "bob", "alice"}));
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("'alice' is counted twice"), std::string::npos) << decoded.status();
}

TEST(CheckpointFileTest, ChecksumMismatchIsNamed) {
  std::string bytes = EncodeCheckpoint(SampleCheckpoint());
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("checksum mismatch"), absl::string_view::npos) << decoded.status();
}

TEST(CheckpointFileTest, AtomicReplaceLeavesTheNewFileAndNoTemporary) {
  TempDir dir;
  const std::string name = CheckpointFileName("round-7");
  const std::string path = dir.path() + "/" + name;
  ASSERT_TRUE(WriteFileAtomically(dir.path(), name, EncodeCheckpoint(SampleCheckpoint("first"))).ok());
  // A crash in the middle of a later write leaves a partial temporary file behind; the
  // checkpoint itself is untouched by it.
  {
    std::ofstream stale(path + ".tmp", std::ios::binary);
    stale << "half a checkpoi";
  }
  absl::StatusOr<AggregationCheckpoint> read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->partial, "first");
  // The next write replaces both.
  ASSERT_TRUE(WriteFileAtomically(dir.path(), name, EncodeCheckpoint(SampleCheckpoint("second"))).ok());
  read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->partial, "second");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // It holds keys and un-noised sums: its owner's alone.
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
}

TEST(CheckpointFileTest, ReadErrorsNameThePath) {
  TempDir dir;
  const std::string path = dir.path() + "/torn.ckpt";
  {
    std::ofstream torn(path, std::ios::binary);
    const std::string bytes = EncodeCheckpoint(SampleCheckpoint());
    torn << bytes.substr(0, bytes.size() / 2);
  }
  absl::StatusOr<AggregationCheckpoint> read = ReadCheckpointFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find(path), absl::string_view::npos) << read.status();
}

TEST(CheckpointFileTest, WriteIntoAMissingDirectoryFails) {
  TempDir dir;
  absl::Status written = WriteFileAtomically(dir.path() + "/missing", "x.ckpt", "bytes");
  EXPECT_EQ(written.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(written.message().find("missing"), absl::string_view::npos) << written;
}

}  // namespace
}  // namespace fedagg
