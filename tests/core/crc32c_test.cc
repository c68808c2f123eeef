// CRC-32C: the standard check values, extension in pieces, and the hardware instruction
// path equal to the portable code on every length and alignment.
#include "service/core/crc32c.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

using crc32c_internal::ExtendHardware;
using crc32c_internal::ExtendPortable;
using crc32c_internal::HardwareAvailable;

uint32_t Of(const std::string& bytes) { return Crc32cExtend(0, bytes.data(), bytes.size()); }

TEST(Crc32cTest, StandardCheckValues) {
  EXPECT_EQ(Of("123456789"), 0xE3069283u);           // the CRC catalogue's check value
  EXPECT_EQ(Of(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  EXPECT_EQ(Of(std::string(32, '\xff')), 0x62A8AB43u);  // 32 bytes of ones
  EXPECT_EQ(Of(""), 0u);
}

TEST(Crc32cTest, ExtendingPieceByPieceEqualsTheWhole) {
  std::string bytes(1000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  const uint32_t whole = Of(bytes);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{500}, size_t{999}}) {
    const uint32_t first = Crc32cExtend(0, bytes.data(), split);
    EXPECT_EQ(Crc32cExtend(first, bytes.data() + split, bytes.size() - split), whole) << split;
  }
}

TEST(Crc32cTest, HardwareEqualsPortableOnEveryLengthAndAlignment) {
  if (!HardwareAvailable()) GTEST_SKIP() << "this CPU has no CRC32 instruction; only the portable code runs";
  std::mt19937 rng(5);
  std::vector<unsigned char> bytes(300);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t length = 0; offset + length <= bytes.size(); ++length) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(ExtendHardware(seed, bytes.data() + offset, length),
                ExtendPortable(seed, bytes.data() + offset, length))
          << "offset " << offset << ", length " << length;
    }
  }
}

// The hardware path joins three chains over blocks of 3 x 2,048 and 3 x 256 bytes: lengths
// around those blocks, and long runs of them with what is left over.
TEST(Crc32cTest, HardwareEqualsPortableAcrossItsBlocks) {
  if (!HardwareAvailable()) GTEST_SKIP() << "this CPU has no CRC32 instruction; only the portable code runs";
  std::mt19937 rng(11);
  std::vector<unsigned char> bytes(70000);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t block : {size_t{768}, size_t{6144}}) {
    for (size_t base : {block - 8, block, 2 * block, 2 * block + 768, 10 * block}) {
      for (size_t extra = 0; extra < 17; ++extra) {
        for (size_t offset : {size_t{0}, size_t{3}}) {
          const size_t length = base + extra;
          if (offset + length > bytes.size()) continue;
          const uint32_t seed = static_cast<uint32_t>(rng());
          ASSERT_EQ(ExtendHardware(seed, bytes.data() + offset, length),
                    ExtendPortable(seed, bytes.data() + offset, length))
              << "offset " << offset << ", length " << length;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fedagg
