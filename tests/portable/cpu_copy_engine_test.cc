// CpuCopyEngine: every span lands byte for byte where it was asked to, whatever its size
// (below and above the size from which streaming stores copy it, 64 KiB), its offset in the slot
// and its source's alignment, and nothing outside the spans is written.
#include "portable/cpu_copy_engine.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg::portable {
namespace {

std::vector<std::byte> Pattern(size_t bytes, uint32_t seed) {
  std::vector<std::byte> out(bytes);
  uint32_t x = seed;
  for (std::byte& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

TEST(CpuCopyEngineTest, SpansOfEverySizeAndAlignmentLandExactlyAndNothingElseIsWritten) {
  constexpr size_t kKiB = size_t{1} << 10;
  const std::vector<size_t> sizes = {1, 63, 64, 1000, 64 * kKiB - 1, 64 * kKiB, 64 * kKiB + 37, 3 * 1024 * kKiB + 5};
  const std::vector<size_t> offsets = {0, 1, 8, 15, 4096 + 3};
  const std::vector<size_t> source_shifts = {0, 1, 7};
  CpuCopyEngine engine;
  for (const size_t bytes : sizes) {
    for (const size_t to : offsets) {
      for (const size_t shift : source_shifts) {
        const size_t slot_bytes = to + bytes + 64;
        absl::StatusOr<std::unique_ptr<StagingBuffer>> buffer = engine.Allocate(slot_bytes);
        ASSERT_TRUE(buffer.ok()) << buffer.status();
        std::byte* device = static_cast<std::byte*>(const_cast<void*>((*buffer)->device()));
        const std::vector<std::byte> before = Pattern(slot_bytes, 7);
        std::copy(before.begin(), before.end(), device);
        const std::vector<std::byte> source = Pattern(bytes + shift, static_cast<uint32_t>(bytes + to));
        const CopySpan span{source.data() + shift, to, bytes};
        ASSERT_TRUE(engine.StartCopy(**buffer, {&span, 1}).ok());
        ASSERT_TRUE(engine.WaitCopied(**buffer).ok());
        SCOPED_TRACE(testing::Message() << bytes << " bytes to offset " << to << ", source shifted " << shift);
        EXPECT_TRUE(std::equal(before.begin(), before.begin() + to, device)) << "bytes before the span";
        EXPECT_TRUE(std::equal(source.begin() + shift, source.end(), device + to)) << "the span";
        EXPECT_TRUE(std::equal(before.begin() + to + bytes, before.end(), device + to + bytes)) << "bytes after it";
      }
    }
  }
}

TEST(CpuCopyEngineTest, SeveralSpansOfOneCopyEachLandInPlace) {
  constexpr size_t kMiB = size_t{1} << 20;
  CpuCopyEngine engine;
  absl::StatusOr<std::unique_ptr<StagingBuffer>> buffer = engine.Allocate(4 * kMiB);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::vector<std::byte> a = Pattern(2 * kMiB + 3, 1), b = Pattern(100, 2), c = Pattern(kMiB + 9, 3);
  const std::vector<CopySpan> spans = {{a.data(), 0, a.size()}, {b.data(), a.size(), b.size()},
                                       {c.data(), a.size() + b.size(), c.size()}};
  ASSERT_TRUE(engine.StartCopy(**buffer, spans).ok());
  ASSERT_TRUE(engine.WaitCopied(**buffer).ok());
  const std::byte* device = static_cast<const std::byte*>((*buffer)->device());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), device));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), device + a.size()));
  EXPECT_TRUE(std::equal(c.begin(), c.end(), device + a.size() + b.size()));
}

}  // namespace
}  // namespace fedagg::portable
