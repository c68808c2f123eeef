// LargeAllocation: sizes, alignment (2 MiB for huge-page mappings, 64 bytes otherwise),
// memory that holds what is written to every byte of it, reuse of released mappings, and
// giving them back (TrimCache); kept, with those in use, within what a server asks
// (ReleasedMappings), a new one making room among the kept ones first; and with a
// pinner, pinned once while they are cached and unpinned, by the pinner that pinned them,
// before they are unmapped.
#include "service/core/large_allocation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/host_memory_pinner.h"
#include "service/core/mutex.h"
#include "tests/core/core_test_util.h"

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

// Below a huge page too (a 1 MiB update), without a pinner: the next update of the size
// takes the released memory, resident already, not fresh pages. The heap, asked for the
// same size in between, would have handed a freed heap buffer out there.
TEST(LargeAllocationTest, ABufferBelowAHugePageIsAMappingTheNextOfItsSizeReuses) {
  const size_t bytes = (size_t{1} << 20) + 3;
  std::byte* released;
  {
    LargeAllocation first(bytes);
    released = first.data();
  }
  std::unique_ptr<void, decltype(&std::free)> heap(std::malloc(bytes), &std::free);
  ASSERT_NE(heap.get(), nullptr);
  EXPECT_NE(heap.get(), static_cast<void*>(released));
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

bool Mapped(const std::byte* memory, size_t bytes) {
  std::vector<unsigned char> pages(bytes / 4096);
  return mincore(const_cast<std::byte*>(memory), bytes, pages.data()) == 0;
}

// A buffer of a size nothing kept serves makes room first: kept and in-use mappings
// together stay within the cache's capacity (32 MiB by default), the oldest kept unmapped.
TEST(LargeAllocationTest, ANewMappingMakesRoomAmongTheKeptOnesOldestFirst) {
  LargeAllocation::TrimCache();
  constexpr size_t kTen = 5 * LargeAllocation::kHugePageBytes;
  std::vector<LargeAllocation> held;
  for (int i = 0; i < 3; ++i) held.emplace_back(kTen);
  std::vector<std::byte*> released;
  for (LargeAllocation& allocation : held) {
    released.push_back(allocation.data());
    allocation = LargeAllocation();  // released in order: the first is the oldest kept
  }
  EXPECT_EQ(LargeAllocation::Mapped().kept, 3 * kTen);
  LargeAllocation other(8 * LargeAllocation::kHugePageBytes);  // 16 MiB: 30 + 16 > 32
  const LargeAllocation::MappedBytes mapped = LargeAllocation::Mapped();
  EXPECT_EQ(mapped.in_use, 8 * LargeAllocation::kHugePageBytes);
  EXPECT_EQ(mapped.kept, kTen) << "not just as much unmapped as the new buffer needed";
  EXPECT_TRUE(Mapped(released[2], kTen));
  LargeAllocation kept(kTen);
  EXPECT_EQ(kept.data(), released[2]) << "the newest was not the one kept";
  LargeAllocation::TrimCache();
}

// Updates of one size fill the window, then updates of another: the first size's kept
// buffers give way, so the process never maps more than the window and kCachedBytes (a
// cache bounded on its own would hold the first window beside the second).
TEST(LargeAllocationTest, KeptBuffersOfAnOldSizeNeverHoldMemoryBesideTheUpdatesInUse) {
  constexpr size_t kWindow = 64 * (size_t{1} << 20);
  ReleasedMappings scope(nullptr, kWindow);
  {
    std::vector<LargeAllocation> round;
    for (int i = 0; i < 8; ++i) round.emplace_back(4 * LargeAllocation::kHugePageBytes);  // 8 MiB each
  }
  EXPECT_EQ(LargeAllocation::Mapped().kept, kWindow);
  size_t most = 0;
  {
    std::vector<LargeAllocation> round;
    for (int i = 0; i < 10; ++i) {
      round.emplace_back(3 * LargeAllocation::kHugePageBytes);  // 6 MiB each
      const LargeAllocation::MappedBytes mapped = LargeAllocation::Mapped();
      most = std::max(most, mapped.in_use + mapped.kept);
    }
  }
  EXPECT_LE(most, kWindow + LargeAllocation::kCachedBytes);  // 64 kept + 60 in use without the bound
  const LargeAllocation::MappedBytes after = LargeAllocation::Mapped();
  EXPECT_EQ(after.in_use, 0u);
  EXPECT_LE(after.kept, kWindow + LargeAllocation::kCachedBytes);
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

TEST(LargeAllocationTest, TrimCacheOfSomeBytesUnmapsTheOldestAndKeepsTheRest) {
  LargeAllocation::TrimCache();
  const size_t huge = LargeAllocation::kHugePageBytes;
  std::byte* oldest;
  std::byte* middle;
  std::byte* newest;
  {
    LargeAllocation c(3 * huge), b(2 * huge), a(huge);
    oldest = a.data();
    middle = b.data();
    newest = c.data();
  }  // released a, b, c in that order (destroyed in reverse of construction)
  std::vector<unsigned char> pages(3 * huge / 4096);
  LargeAllocation::TrimCache(huge + 1);  // more than the oldest: the next goes too
  EXPECT_EQ(mincore(oldest, huge, pages.data()), -1);
  EXPECT_EQ(mincore(middle, 2 * huge, pages.data()), -1);
  EXPECT_EQ(mincore(newest, 3 * huge, pages.data()), 0) << "the newest is kept for the next update";
  LargeAllocation next(3 * huge);
  EXPECT_EQ(next.data(), newest);
}

using ::fedagg::testing::kMiB;

// Records what is pinned; refuses to pin when told to.
class FakePinner final : public HostMemoryPinner {
 public:
  explicit FakePinner(bool refuse = false) : refuse_(refuse) {}

  bool Pin(void* data, size_t bytes) override {
    if (refuse_) return false;
    MutexLock lock(&mu_);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 4096, 0u) << "pinned memory must be page-aligned";
    EXPECT_TRUE(pinned_.emplace(data, bytes).second) << "pinned twice";
    ++pins_;
    return true;
  }
  void Unpin(void* data, size_t bytes) override {
    MutexLock lock(&mu_);
    auto it = pinned_.find(data);
    ASSERT_NE(it, pinned_.end()) << "unpinned what was not pinned";
    EXPECT_EQ(it->second, bytes);
    pinned_.erase(it);
    ++unpins_;
  }

  int pins() const {
    MutexLock lock(&mu_);
    return pins_;
  }
  int unpins() const {
    MutexLock lock(&mu_);
    return unpins_;
  }
  size_t pinned_bytes(const void* data) const {
    MutexLock lock(&mu_);
    auto it = pinned_.find(const_cast<void*>(data));
    return it == pinned_.end() ? 0 : it->second;
  }

 private:
  const bool refuse_;
  mutable Mutex mu_;
  std::map<void*, size_t> pinned_ ABSL_GUARDED_BY(mu_);
  int pins_ ABSL_GUARDED_BY(mu_) = 0;
  int unpins_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(LargeAllocationPinningTest, AMappingIsPinnedOnceAndStaysPinnedWhileCached) {
  auto pinner = std::make_shared<FakePinner>();
  ReleasedMappings scope(pinner, 64 * kMiB);
  std::byte* first;
  {
    LargeAllocation allocation(3 * kMiB);
    EXPECT_TRUE(allocation.pinned());
    first = allocation.data();
    EXPECT_EQ(pinner->pinned_bytes(first), 4 * kMiB);
    ExpectWritableEverywhere(allocation);
  }
  EXPECT_EQ(pinner->unpins(), 0) << "a cached mapping stays pinned";
  {
    LargeAllocation again(3 * kMiB);
    EXPECT_EQ(again.data(), first);
    EXPECT_TRUE(again.pinned());
  }
  EXPECT_EQ(pinner->pins(), 1);
  LargeAllocation::TrimCache();
  EXPECT_EQ(pinner->unpins(), 1);
  EXPECT_EQ(pinner->pinned_bytes(first), 0u);
}

TEST(LargeAllocationPinningTest, BuffersBelowAHugePageArePinnedFromTheMinimumUp) {
  auto pinner = std::make_shared<FakePinner>();
  ReleasedMappings scope(pinner, 0);
  {
    LargeAllocation small(100 << 10);
    EXPECT_TRUE(small.pinned());
    EXPECT_EQ(small.size(), size_t{100} << 10);
    EXPECT_EQ(pinner->pinned_bytes(small.data()), size_t{128} << 10);  // whole 64 KiB granules
    ExpectWritableEverywhere(small);
    LargeAllocation below(LargeAllocation::kMinMappedBytes - 1);
    EXPECT_FALSE(below.pinned());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(below.data()) % 64, 0u);
  }
  EXPECT_EQ(pinner->pins(), 1);
}

TEST(LargeAllocationPinningTest, MemoryThePinnerRefusedIsUsedUnpinned) {
  auto pinner = std::make_shared<FakePinner>(/*refuse=*/true);
  ReleasedMappings scope(pinner, 0);
  LargeAllocation allocation(5 * kMiB);
  EXPECT_FALSE(allocation.pinned());
  ExpectWritableEverywhere(allocation);
}

TEST(LargeAllocationPinningTest, TheCacheKeepsWhatItWasAskedToKeep) {
  auto pinner = std::make_shared<FakePinner>();
  ReleasedMappings scope(pinner, 64 * kMiB);
  for (int round = 0; round < 3; ++round) {
    std::vector<LargeAllocation> window;  // 48 MiB at once: more than the default cache
    for (int i = 0; i < 6; ++i) window.emplace_back(8 * kMiB);
  }
  EXPECT_EQ(pinner->pins(), 6) << "the second and third rounds took the cached mappings";
  EXPECT_EQ(pinner->unpins(), 0);
}

TEST(LargeAllocationPinningTest, AMappingIsUnpinnedByThePinnerThatPinnedIt) {
  auto first = std::make_shared<FakePinner>();
  auto second = std::make_shared<FakePinner>();
  ReleasedMappings outer(first, 0);
  {
    LargeAllocation pinned_by_first(2 * kMiB);
    EXPECT_TRUE(pinned_by_first.pinned());
    ReleasedMappings scope(second, 0);
    LargeAllocation pinned_by_second(2 * kMiB);
    EXPECT_NE(second->pinned_bytes(pinned_by_second.data()), 0u);
  }  // both released: the first one's mapping is not kept, its pinner changed
  EXPECT_EQ(first->pins(), 1);
  EXPECT_EQ(first->unpins(), 1);
  EXPECT_EQ(second->unpins(), 1);  // the scope's end emptied the cache
  outer = ReleasedMappings();
  EXPECT_EQ(first->unpins(), 1);
}

// A server without a pinner keeps as many released bytes as its window too (unpinned):
// beyond the default of 32 MiB, every buffer of a round is there for the next.
TEST(LargeAllocationTest, ReleasedMappingsKeepsAsManyBytesAsAskedWithoutAPinner) {
  auto mapped_after_a_round = [] {
    std::vector<std::byte*> at;
    {
      std::vector<LargeAllocation> window;  // 48 MiB at once
      for (int i = 0; i < 6; ++i) at.push_back(window.emplace_back(8 * kMiB).data());
    }
    std::vector<unsigned char> pages(8 * kMiB / 4096);
    int mapped = 0;
    for (std::byte* memory : at) mapped += mincore(memory, 8 * kMiB, pages.data()) == 0;
    return mapped;
  };
  LargeAllocation::TrimCache();
  EXPECT_EQ(mapped_after_a_round(), 4) << "the default keeps 32 MiB";
  {
    ReleasedMappings scope(nullptr, 64 * kMiB);
    EXPECT_EQ(mapped_after_a_round(), 6);
    EXPECT_FALSE(LargeAllocation(8 * kMiB).pinned());
  }
  EXPECT_EQ(mapped_after_a_round(), 4) << "the default again once the scope ends";
  LargeAllocation::TrimCache();
}

}  // namespace
}  // namespace fedagg
