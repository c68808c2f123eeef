// DurableAcks on its own: an ack waits for a checkpoint of the version it was given, is
// answered false where no checkpoint will hold it, and nothing waits past Stop.
#include "service/rounds/durable_acks.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

// Records the answers its waiters get.
struct Answers {
  std::vector<bool> got;
  DurableAcks::Waiter waiter() {
    return [this](bool durable) { got.push_back(durable); };
  }
};

TEST(DurableAcksTest, AnAckWaitsForACheckpointOfItsVersion) {
  DurableAcks acks(/*checkpointed=*/true);
  Answers answers;
  int wanted_calls = 0;
  acks.OnWanted([&wanted_calls] { ++wanted_calls; });
  acks.Changed();  // version 2
  DurableAcks::Waiter first = answers.waiter();
  std::function<void()> wanted;
  EXPECT_EQ(acks.Await(first, &wanted), std::nullopt);
  ASSERT_TRUE(wanted);
  wanted();
  EXPECT_EQ(wanted_calls, 1);
  acks.Changed();  // version 3
  DurableAcks::Waiter second = answers.waiter();
  EXPECT_EQ(acks.Await(second, &wanted), std::nullopt);
  EXPECT_TRUE(acks.awaited());

  EXPECT_TRUE(acks.MarkDurableUpTo(1).empty());
  DurableAcks::Waiters released = acks.MarkDurableUpTo(2);
  ASSERT_EQ(released.size(), 1u);
  DurableAcks::Run(released, true);
  EXPECT_EQ(answers.got, std::vector<bool>{true});
  EXPECT_FALSE(acks.AllDurable());
  released = acks.MarkDurableUpTo(3);
  DurableAcks::Run(released, true);
  EXPECT_EQ(answers.got, (std::vector<bool>{true, true}));
  EXPECT_TRUE(acks.AllDurable());
  EXPECT_FALSE(acks.awaited());

  DurableAcks::Waiter third = answers.waiter();
  EXPECT_EQ(acks.Await(third, &wanted), std::optional<bool>(true));  // held already: answered now
  EXPECT_TRUE(acks.MarkDurableUpTo(1).empty());
  EXPECT_TRUE(acks.AllDurable());  // an older checkpoint's word moves nothing back
}

TEST(DurableAcksTest, WithoutCheckpointsNoAckIsDurable) {
  DurableAcks acks(/*checkpointed=*/false);
  EXPECT_FALSE(acks.acks());
  Answers answers;
  DurableAcks::Waiter done = answers.waiter();
  std::function<void()> wanted;
  EXPECT_EQ(acks.Await(done, &wanted), std::optional<bool>(false));
  acks.SetUpstream(true);  // a mirror whose parent writes checkpoints
  EXPECT_TRUE(acks.acks());
  EXPECT_EQ(acks.Await(done, &wanted), std::nullopt);
}

TEST(DurableAcksTest, StopAnswersTheWaitingAndEveryLaterAckFalse) {
  DurableAcks acks(/*checkpointed=*/true);
  Answers answers;
  DurableAcks::Waiter done = answers.waiter();
  std::function<void()> wanted;
  ASSERT_EQ(acks.Await(done, &wanted), std::nullopt);
  DurableAcks::Waiters abandoned = acks.Stop();
  DurableAcks::Run(abandoned, false);
  EXPECT_EQ(answers.got, std::vector<bool>{false});
  DurableAcks::Waiter later = answers.waiter();
  EXPECT_EQ(acks.Await(later, &wanted), std::optional<bool>(false));
  EXPECT_TRUE(acks.Stop().empty());
}

TEST(DurableAcksTest, MarkAllDurableCoversEveryChangeSoFar) {
  DurableAcks acks(/*checkpointed=*/true);
  EXPECT_FALSE(acks.AllDurable());  // a new aggregation is not on disk yet
  acks.Changed();
  acks.MarkAllDurable();
  EXPECT_TRUE(acks.AllDurable());
  acks.Changed();
  EXPECT_FALSE(acks.AllDurable());
}

}  // namespace
}  // namespace fedagg
