// Aggregation's queue depth (the fedagg_pending_updates and fedagg_updates_in_flight
// gauges): exact through begin, commit, abandon, a full batch taken by the reduction
// workers, and finalization.
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::CountingSpec;
using testing::CountingUpdate;

TEST(AggregationQueueTest, PendingAndInFlightFollowEveryUpdate) {
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(CountingSpec("q"));
  ASSERT_TRUE(config.ok()) << config.status();
  AggregationOptions options;
  options.batching.batch_size = 3;
  options.flush_interval = absl::Hours(1);
  options.child_grace = absl::ZeroDuration();
  Aggregation aggregation(*std::move(config), options);
  EXPECT_EQ(aggregation.pending_updates(), 0);
  EXPECT_EQ(aggregation.updates_in_flight(), 0);

  ASSERT_TRUE(aggregation.BeginUpdate("a").ok());
  ASSERT_TRUE(aggregation.BeginUpdate("b").ok());
  ASSERT_TRUE(aggregation.BeginUpdate("c").ok());
  EXPECT_EQ(aggregation.updates_in_flight(), 3);
  ASSERT_TRUE(aggregation.CommitUpdate("a", CountingUpdate(aggregation.reduction(), 1)).ok());
  aggregation.AbandonUpdate("b");
  EXPECT_EQ(aggregation.pending_updates(), 1);
  EXPECT_EQ(aggregation.updates_in_flight(), 1);
  ASSERT_TRUE(aggregation.CommitUpdate("c", CountingUpdate(aggregation.reduction(), 2)).ok());
  EXPECT_EQ(aggregation.pending_updates(), 2);
  EXPECT_EQ(aggregation.updates_in_flight(), 0);

  // The third committed update fills the batch, which a reduction worker takes soon after
  // the commit returns.
  ASSERT_TRUE(aggregation.BeginUpdate("d").ok());
  ASSERT_TRUE(aggregation.CommitUpdate("d", CountingUpdate(aggregation.reduction(), 3)).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (aggregation.pending_updates() != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(aggregation.pending_updates(), 0);

  // One more waits in the next batch until finalization reduces it.
  ASSERT_TRUE(aggregation.BeginUpdate("e").ok());
  ASSERT_TRUE(aggregation.CommitUpdate("e", CountingUpdate(aggregation.reduction(), 4)).ok());
  EXPECT_EQ(aggregation.pending_updates(), 1);
  ASSERT_TRUE(aggregation.Seal().ok());  // no children: finalizes, reducing what is pending
  EXPECT_EQ(aggregation.state(), v1::FINALIZED);
  EXPECT_EQ(aggregation.pending_updates(), 0);
  EXPECT_EQ(aggregation.updates_in_flight(), 0);
}

}  // namespace
}  // namespace fedagg
