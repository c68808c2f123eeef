// Fuzz target: DecodeCheckpoint of an arbitrary checkpoint body (what a root reads back
// from --checkpoint_dir after a crash), behind a well-formed header with the body's own
// CRC-32C so that the body's decoder, not the checksum, meets the bytes. The first input
// byte picks the format version (1 or 2). Invariants: a refusal is DATA_LOSS; what
// decodes lists each counted client id once, a set made from those ids (what a restore
// does) holds exactly them, and it re-encodes to bytes that decode and encode to the same
// bytes again (a stable round trip).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "service/core/byte_codec.h"
#include "service/core/crc32c.h"
#include "service/rounds/checkpoint_file.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedagg;
  if (size == 0) return 0;
  const uint32_t version = 1 + (data[0] & 1);
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ByteWriter file;
  file.PutElements("FEDAGGCK", 8);
  file.Put<uint32_t>(version);
  file.Put<uint32_t>(Crc32cExtend(0, body.data(), body.size()));
  file.Put<uint64_t>(body.size());
  const std::string bytes = file.Take() + body;

  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(bytes);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  const std::vector<std::string> ids = decoded->counted.ToVector();
  FUZZ_CHECK(ids.size() == decoded->counted.size());
  FUZZ_CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
  const ClientIdSet restored(decoded->counted);
  FUZZ_CHECK(restored.size() == ids.size());
  for (const std::string& id : ids) FUZZ_CHECK(restored.contains(id));

  const std::string encoded = EncodeCheckpoint(*decoded);
  absl::StatusOr<AggregationCheckpoint> again = DecodeCheckpoint(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(EncodeCheckpoint(*again) == encoded);
  FUZZ_CHECK(again->counted.ToVector() == ids);
  return 0;
}
