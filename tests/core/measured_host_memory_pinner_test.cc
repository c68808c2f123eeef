// MeasuredHostMemoryPinner counts what the pinner it wraps does, through LargeAllocation's
// mapping cache as the server uses it: a mapping pinned once, still pinned while cached,
// unpinned when the cache is trimmed; refusals counted apart; the time spent measured.
#include "service/core/measured_host_memory_pinner.h"

#include <cstddef>
#include <memory>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/core/large_allocation.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::kMiB;

// Pins everything, or nothing when told to refuse, taking `delay` each time.
class SlowPinner final : public HostMemoryPinner {
 public:
  explicit SlowPinner(bool refuse, absl::Duration delay = absl::ZeroDuration()) : refuse_(refuse), delay_(delay) {}
  bool Pin(void*, size_t) override {
    absl::SleepFor(delay_);
    return !refuse_;
  }
  void Unpin(void*, size_t) override { absl::SleepFor(delay_); }

 private:
  const bool refuse_;
  const absl::Duration delay_;
};

TEST(MeasuredHostMemoryPinnerTest, CountsPinsBytesPinnedNowAndTime) {
  auto measured = std::make_shared<MeasuredHostMemoryPinner>(
      std::make_shared<SlowPinner>(/*refuse=*/false, absl::Milliseconds(2)));
  ReleasedMappings scope(measured, 64 * kMiB);
  {
    LargeAllocation first(3 * kMiB);  // a 4 MiB mapping: whole 2 MiB pages from a huge page up
    LargeAllocation second(100 << 10);  // 128 KiB: whole 64 KiB granules below one
    EXPECT_TRUE(first.pinned());
    EXPECT_TRUE(second.pinned());
    EXPECT_EQ(measured->pins(), 2u);
    EXPECT_EQ(measured->pinned_bytes(), 4 * kMiB + (size_t{128} << 10));
  }
  EXPECT_EQ(measured->pinned_bytes(), 4 * kMiB + (size_t{128} << 10)) << "cached mappings stay pinned";
  {
    LargeAllocation again(3 * kMiB);  // from the cache: no new pin
    EXPECT_TRUE(again.pinned());
  }
  EXPECT_EQ(measured->pins(), 2u);
  LargeAllocation::TrimCache();
  EXPECT_EQ(measured->pinned_bytes(), 0u);
  EXPECT_EQ(measured->failures(), 0u);
  EXPECT_GE(measured->seconds(), 0.008);  // two pins and two unpins of 2 ms each
}

TEST(MeasuredHostMemoryPinnerTest, RefusalsAreCountedApartAndPinNothing) {
  auto measured = std::make_shared<MeasuredHostMemoryPinner>(std::make_shared<SlowPinner>(/*refuse=*/true));
  ReleasedMappings scope(measured, 0);
  LargeAllocation allocation(5 * kMiB);
  EXPECT_FALSE(allocation.pinned());
  EXPECT_EQ(measured->failures(), 1u);
  EXPECT_EQ(measured->pins(), 0u);
  EXPECT_EQ(measured->pinned_bytes(), 0u);
}

}  // namespace
}  // namespace fedagg
