// LargeAllocation: sizes, alignment (2 MiB for huge-page mappings, 64 bytes otherwise),
// memory that holds what is written to every byte of it, reuse of released mappings, and
// giving them back (TrimCache).
#include "service/core/large_allocation.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

void ExpectWritableEverywhere(const LargeAllocation& allocation) {
  for (size_t i = 0; i < allocation.size(); ++i) allocation.data()[i] = std::byte(i * 7);
  for (size_t i = 0; i < allocation.size(); i += 4093) {
    ASSERT_EQ(allocation.data()[i], std::byte(i * 7)) << "byte " << i;
  }
  EXPECT_EQ(allocation.data()[allocation.size() - 1], std::byte((allocation.size() - 1) * 7));
}

TEST(LargeAllocationTest, EmptyHoldsNothing) {
  LargeAllocation empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

TEST(LargeAllocationTest, SmallBuffersAreCacheLineAligned) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, LargeAllocation::kHugePageBytes - 1}) {
    LargeAllocation allocation(bytes);
    EXPECT_EQ(allocation.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(allocation.data()) % 64, 0u) << bytes;
    ExpectWritableEverywhere(allocation);
  }
}

TEST(LargeAllocationTest, LargeBuffersAreHugePageAligned) {
  for (size_t bytes : {LargeAllocation::kHugePageBytes, LargeAllocation::kHugePageBytes * 3 + 5,
                       size_t{16'000'000}}) {
    LargeAllocation allocation(bytes);
    EXPECT_EQ(allocation.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(allocation.data()) % LargeAllocation::kHugePageBytes, 0u) << bytes;
    ExpectWritableEverywhere(allocation);
  }
}

TEST(LargeAllocationTest, MovingTransfersOwnership) {
  LargeAllocation first(LargeAllocation::kHugePageBytes * 2);
  std::byte* memory = first.data();
  memory[0] = std::byte{42};
  LargeAllocation second = std::move(first);
  EXPECT_EQ(second.data(), memory);
  EXPECT_EQ(second.data()[0], std::byte{42});
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(first.size(), 0u);
  second = LargeAllocation(10);  // the mapping is released, the heap buffer taken
  EXPECT_EQ(second.size(), 10u);
}

TEST(LargeAllocationTest, ReleasedMappingServesTheNextBufferOfItsSize) {
  const size_t bytes = LargeAllocation::kHugePageBytes * 5 + 1;
  std::byte* released;
  {
    LargeAllocation first(bytes);
    first.data()[bytes - 1] = std::byte{7};
    released = first.data();
  }
  LargeAllocation other_size(LargeAllocation::kHugePageBytes * 9);
  EXPECT_NE(other_size.data(), released);
  LargeAllocation same_size(bytes);
  EXPECT_EQ(same_size.data(), released);
  ExpectWritableEverywhere(same_size);
}

TEST(LargeAllocationTest, AMappingLargerThanTheCacheIsKeptAloneForTheNextOfItsSize) {
  const size_t bytes = LargeAllocation::kCachedBytes + LargeAllocation::kHugePageBytes;
  std::byte* released;
  {
    LargeAllocation large(bytes);
    LargeAllocation small(LargeAllocation::kHugePageBytes);
    released = large.data();
  }  // the small one is released first, the large one last: the small one makes room
  LargeAllocation same_size(bytes);
  EXPECT_EQ(same_size.data(), released);
  ExpectWritableEverywhere(same_size);
}

TEST(LargeAllocationTest, TrimCacheUnmapsTheReleasedMappings) {
  const size_t bytes = LargeAllocation::kHugePageBytes * 3;
  std::byte* released;
  {
    LargeAllocation kept(bytes);
    released = kept.data();
  }
  std::vector<unsigned char> pages(bytes / 4096);
  ASSERT_EQ(mincore(released, bytes, pages.data()), 0);  // cached: still mapped
  LargeAllocation::TrimCache();
  EXPECT_EQ(mincore(released, bytes, pages.data()), -1);  // gone from the address space
  EXPECT_EQ(errno, ENOMEM);
}

}  // namespace
}  // namespace fedagg
