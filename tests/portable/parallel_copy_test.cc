// ParallelCopy copies every byte of every range, exactly once, to its place: ranges small
// and large (cut across threads, at chunk boundaries that fall inside ranges), empty
// ranges among them, and no ranges at all.
#include "portable/parallel_copy.h"

#include <cstddef>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/thread_pool.h"

namespace fedagg::portable {
namespace {

// Copies ranges of the given sizes from a random source into a zeroed destination, with
// one byte of gap after each, and checks every byte (the gaps must stay zero).
void CheckCopy(const std::vector<size_t>& sizes, ThreadPool& pool) {
  size_t total = 0;
  for (size_t size : sizes) total += size + 1;
  std::vector<std::byte> from(total), to(total, std::byte{0});
  std::mt19937 random(7);
  for (std::byte& b : from) b = static_cast<std::byte>(1 + random() % 255);  // never zero
  std::vector<CopyRange> ranges;
  size_t at = 0;
  for (size_t size : sizes) {
    ranges.push_back({to.data() + at, from.data() + at, size});
    at += size + 1;
  }
  ParallelCopy(ranges, pool);
  at = 0;
  for (size_t size : sizes) {
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(to[at + i], from[at + i]) << "range at " << at << ", byte " << i;
    ASSERT_EQ(to[at + size], std::byte{0}) << "the gap after the range at " << at << " was written";
    at += size + 1;
  }
}

TEST(ParallelCopyTest, OneLargeRangeIsCopiedByAllThreads) {
  ThreadPool pool(4);
  CheckCopy({5 * kMinChunkBytes + 12345}, pool);
}

TEST(ParallelCopyTest, ManyRangesWithEmptyOnesAmongThem) {
  ThreadPool pool(3);
  CheckCopy({0, 17, kMinChunkBytes - 1, 0, 0, 3 * kMinChunkBytes + 5, 1, 0, 4096, kMinChunkBytes, 2 * kMinChunkBytes + 1, 0}, pool);
}

TEST(ParallelCopyTest, SmallRangesAndNoRanges) {
  ThreadPool pool(4);
  CheckCopy({1, 2, 3, 4000}, pool);
  CheckCopy({}, pool);
  CheckCopy({0, 0}, pool);
}

TEST(ParallelCopyTest, OneThreadCopiesInline) {
  ThreadPool pool(1);
  CheckCopy({3 * kMinChunkBytes + 7, 0, 99}, pool);
}

}  // namespace
}  // namespace fedagg::portable
