// The stall watch and its sweeper, without a server: an open update that sees no message
// for the timeout is evicted on the sweeper's thread, once, and the stream's next
// message is refused; a closed update, or one whose message is still being handled, is
// not; after Shutdown nothing is evicted; a sweeper without a timeout evicts nothing.
#include "service/rpc/stall_watch.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/rpc/stall_sweeper.h"

namespace fedagg {
namespace {

constexpr absl::Duration kTimeout = absl::Milliseconds(20);

// Waits up to 5 s for `evictions` to reach `want`.
bool EvictedWithin(const std::atomic<int>& evictions, int want) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (evictions.load() < want && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return evictions.load() >= want;
}

// A watch on a sweeper with kTimeout, counting its evictions.
class StallWatchTest : public ::testing::Test {
 protected:
  StallSweeper sweeper{kTimeout};
  std::atomic<int> evictions{0};
  StallWatch watch{&sweeper, [this] { ++evictions; }};
};

TEST_F(StallWatchTest, AnOpenUpdateWithoutMessagesIsEvictedOnce) {
  ASSERT_TRUE(watch.MessageArrived());
  watch.UpdateOpened();
  watch.MessageHandled();
  ASSERT_TRUE(EvictedWithin(evictions, 1));
  EXPECT_FALSE(watch.MessageArrived()) << "the stream is ending after an eviction";
  absl::SleepFor(10 * kTimeout);
  EXPECT_EQ(evictions.load(), 1);
  watch.Shutdown();
}

TEST_F(StallWatchTest, AClosedUpdateOrAMessageBeingHandledIsNotEvicted) {
  ASSERT_TRUE(watch.MessageArrived());
  watch.UpdateOpened();
  watch.UpdateClosed();
  watch.MessageHandled();
  absl::SleepFor(10 * kTimeout);
  EXPECT_EQ(evictions.load(), 0) << "no update was open";
  ASSERT_TRUE(watch.MessageArrived());  // a message of an open update, handled for long
  watch.UpdateOpened();
  absl::SleepFor(10 * kTimeout);
  EXPECT_EQ(evictions.load(), 0) << "evicted while its message was being handled";
  watch.MessageHandled();
  EXPECT_TRUE(EvictedWithin(evictions, 1)) << "stalled after its message was handled";
}

TEST_F(StallWatchTest, NothingIsEvictedAfterShutdown) {
  watch.UpdateOpened();
  watch.Shutdown();
  absl::SleepFor(10 * kTimeout);
  EXPECT_EQ(evictions.load(), 0);
}

TEST(StallSweeperTest, ASweeperWithoutATimeoutEvictsNothing) {
  for (const absl::Duration timeout : {absl::ZeroDuration(), absl::InfiniteDuration()}) {
    StallSweeper sweeper(timeout);
    EXPECT_FALSE(sweeper.enabled());
    std::atomic<int> evictions{0};
    StallWatch watch(&sweeper, [&] { ++evictions; });
    watch.UpdateOpened();
    absl::SleepFor(5 * kTimeout);
    EXPECT_EQ(evictions.load(), 0);
  }
}

TEST(StallSweeperTest, ThePeriodIsAQuarterOfTheTimeoutWithinBounds) {
  EXPECT_EQ(StallSweeper(absl::Milliseconds(100)).period(), absl::Milliseconds(25));
  EXPECT_EQ(StallSweeper(absl::Seconds(60)).period(), absl::Milliseconds(250));
  EXPECT_EQ(StallSweeper(absl::Microseconds(100)).period(), absl::Milliseconds(1));
}

}  // namespace
}  // namespace fedagg
