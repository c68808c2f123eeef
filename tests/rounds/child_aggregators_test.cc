// ChildAggregators on its own: pushes merged in sequence and once, leases ended only by
// the child that holds them, who is waited for, who is given up as lost and when, and a
// checkpoint's progress restored as it was written.
#include "service/rounds/child_aggregators.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

using Strings = std::vector<std::string>;

constexpr absl::Duration kChildGrace = absl::Seconds(10);

ChildAggregators::Registration JoinOrDie(ChildAggregators& children, const std::string& child_id,
                                         ChildNotifier notifier = [](ChildCommand) {}) {
  ChildAggregators::GivenUp given_up;
  absl::StatusOr<ChildAggregators::Registration> joined = children.Join(child_id, notifier, false, &given_up);
  EXPECT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(given_up.children, 0);
  return joined.ok() ? *joined : ChildAggregators::Registration{};
}

// Whether push `sequence` of `child_id` is to be merged, asserting that it is not refused.
bool Accepts(const ChildAggregators& children, const std::string& child_id, uint64_t sequence) {
  const absl::StatusOr<bool> next = children.CheckPush(child_id, sequence);
  EXPECT_TRUE(next.ok()) << next.status();
  return next.ok() && *next;
}

TEST(ChildAggregatorsTest, PushesAreMergedInSequenceAndOnce) {
  ChildAggregators children("r");
  EXPECT_EQ(children.CheckPush("edge@1", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Accepts(children, "edge@1", 1));
  EXPECT_EQ(children.CheckPush("edge@1", 2).status().code(), absl::StatusCode::kFailedPrecondition);
  children.RecordPush("edge@1", 1, false, {});
  EXPECT_FALSE(Accepts(children, "edge@1", 1));  // a retried push: acknowledged, not merged again
  EXPECT_TRUE(Accepts(children, "edge@1", 2));
  const absl::Status skipped = children.CheckPush("edge@1", 4).status();
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(skipped.message().find("expected 2"), absl::string_view::npos) << skipped;
}

TEST(ChildAggregatorsTest, APushEndsOnlyTheLeasesItsChildHolds) {
  ChildAggregators children("r");
  children.Grant("a@1", "x");
  children.Grant("b@1", "y");
  EXPECT_EQ(children.claims(), 2u);
  EXPECT_EQ(children.RecordPush("a@1", 1, false, {"x", "y"}), Strings{"x"});
  EXPECT_EQ(children.HolderOf("x"), nullptr);
  ASSERT_NE(children.HolderOf("y"), nullptr);
  EXPECT_EQ(*children.HolderOf("y"), "b@1");
  EXPECT_FALSE(children.ReleaseClaim("a@1", "y"));
  EXPECT_TRUE(children.ReleaseClaim("b@1", "y"));
  EXPECT_EQ(children.claims(), 0u);
}

TEST(ChildAggregatorsTest, JoinedChildrenAndUndeliveredClaimsAreWaitedFor) {
  ChildAggregators children("r");
  EXPECT_TRUE(children.AllDone());
  const ChildAggregators::Registration joined = JoinOrDie(children, "a@1");
  EXPECT_FALSE(children.AllDone());
  ASSERT_TRUE(children.Leave("a@1", joined.join, absl::Now()));
  EXPECT_TRUE(children.AllDone());  // gone, and it holds nothing acknowledged

  children.Grant("b@1", "y");  // claimed without ever joining: acknowledged, not delivered
  EXPECT_FALSE(children.AllDone());
  children.RecordPush("b@1", 1, /*final=*/false, {"y"});  // delivered: its lease ends
  EXPECT_TRUE(children.AllDone());
}

TEST(ChildAggregatorsTest, AChildGoneForTheGracePeriodWithClaimsIsGivenUp) {
  ChildAggregators children("r");
  const ChildAggregators::Registration joined = JoinOrDie(children, "a@1");
  children.Grant("a@1", "x");
  children.Grant("a@1", "z");
  JoinOrDie(children, "c@1");  // joined, holds nothing: never given up
  // Known for longer than the grace period, but its stream is open.
  EXPECT_EQ(children.GiveUpSilent(absl::Now() + absl::Hours(1), kChildGrace).children, 0);
  const absl::Time left = absl::Now();
  ASSERT_TRUE(children.Leave("a@1", joined.join, left));
  EXPECT_EQ(children.GiveUpSilent(left + kChildGrace - absl::Milliseconds(1), kChildGrace).children, 0);

  const ChildAggregators::GivenUp given_up = children.GiveUpSilent(left + kChildGrace, kChildGrace);
  EXPECT_EQ(given_up.children, 1);
  EXPECT_EQ(given_up.client_ids, (Strings{"x", "z"}));
  EXPECT_EQ(children.claims(), 0u);
  EXPECT_EQ(children.CheckNotGivenUp("a@1").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(children.CheckPush("a@1", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  ChildAggregators::GivenUp ignored;
  EXPECT_EQ(children.Join("a@1", nullptr, false, &ignored).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(children.CheckNotGivenUp("c@1").ok());
}

TEST(ChildAggregatorsTest, ANewerIncarnationGivesUpAGoneOneOfTheSameNode) {
  ChildAggregators children("r");
  const ChildAggregators::Registration old_join = JoinOrDie(children, "edge@1");
  children.Grant("edge@1", "x");
  const ChildAggregators::Registration other_join = JoinOrDie(children, "other@1");
  children.Grant("other@1", "y");
  ASSERT_TRUE(children.Leave("other@1", other_join.join, absl::Now()));  // gone too, but another node
  ChildAggregators::GivenUp given_up;
  ASSERT_TRUE(children.Join("edge@2", nullptr, false, &given_up).ok());
  EXPECT_EQ(given_up.children, 0);  // edge@1's stream is still open: it is not gone

  ASSERT_TRUE(children.Leave("edge@1", old_join.join, absl::Now()));
  ASSERT_TRUE(children.Join("edge@2", nullptr, false, &given_up).ok());
  EXPECT_EQ(given_up.children, 1);
  EXPECT_EQ(given_up.client_ids, Strings{"x"});
  ASSERT_NE(children.HolderOf("y"), nullptr);  // another node's claims stay
}

TEST(ChildAggregatorsTest, TheEndOfAnOlderJoinIsIgnored) {
  ChildAggregators children("r");
  int seals = 0;
  const ChildNotifier notifier = [&seals](ChildCommand command) { seals += command == ChildCommand::kSeal; };
  const ChildAggregators::Registration first = JoinOrDie(children, "a@1", notifier);
  ChildAggregators::GivenUp given_up;
  const absl::StatusOr<ChildAggregators::Registration> rejoined = children.Join("a@1", notifier, true, &given_up);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  const ChildAggregators::Registration& second = *rejoined;
  EXPECT_TRUE(second.sealed);
  EXPECT_NE(first.join, second.join);
  EXPECT_FALSE(children.Leave("a@1", first.join, absl::Now()));
  std::vector<ChildNotifier> joined = children.JoinedNotifiers();
  ASSERT_EQ(joined.size(), 1u);
  joined.front()(ChildCommand::kSeal);
  EXPECT_EQ(seals, 1);
  EXPECT_TRUE(children.Leave("a@1", second.join, absl::Now()));
  EXPECT_TRUE(children.JoinedNotifiers().empty());
}

TEST(ChildAggregatorsTest, ProgressIsRestoredAsWrittenAndRestoredChildrenAreWaitedFor) {
  ChildAggregators children("r");
  JoinOrDie(children, "a@1");  // pushes 1 and 2, delivering its claim: holds none, no final push
  children.Grant("a@1", "x");
  children.RecordPush("a@1", 1, false, {});
  children.RecordPush("a@1", 2, false, {"x"});
  children.Grant("b@1", "y");  // its final push delivered its claim
  children.RecordPush("b@1", 1, true, {"y"});
  children.Grant("c@1", "z");  // never joined: known since its claim, given up after the grace
  EXPECT_EQ(children.GiveUpSilent(absl::Now() + absl::Hours(1), kChildGrace).children, 1);
  children.Grant("e@1", "q");  // holds a claim it has not delivered
  const std::vector<AggregationCheckpoint::ChildProgress> written = children.Progress();
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written[0].last_sequence, 2u);
  EXPECT_TRUE(written[0].leased.empty());
  EXPECT_TRUE(written[1].final_received);
  EXPECT_TRUE(written[2].released);
  EXPECT_EQ(written[3].leased, Strings{"q"});

  ChildAggregators restored("r");
  const absl::Time restart = absl::Now() + absl::Hours(2);
  for (const AggregationCheckpoint::ChildProgress& progress : written) restored.Restore(progress, restart);
  const std::vector<AggregationCheckpoint::ChildProgress> read = restored.Progress();
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].child_id, written[i].child_id);
    EXPECT_EQ(read[i].last_sequence, written[i].last_sequence);
    EXPECT_EQ(read[i].final_received, written[i].final_received);
    EXPECT_EQ(read[i].released, written[i].released);
    EXPECT_EQ(read[i].leased, written[i].leased);
  }
  EXPECT_EQ(restored.DurableSequence("a@1"), 2u);  // the checkpoint holds what it restored
  EXPECT_TRUE(Accepts(restored, "a@1", 3));
  EXPECT_EQ(restored.CheckNotGivenUp("c@1").code(), absl::StatusCode::kFailedPrecondition);
  // e@1, with its claim, is lost since the restart: given up a grace period after it.
  EXPECT_EQ(restored.GiveUpSilent(restart + kChildGrace - absl::Milliseconds(1), kChildGrace).children, 0);
  const ChildAggregators::GivenUp given_up = restored.GiveUpSilent(restart + kChildGrace, kChildGrace);
  EXPECT_EQ(given_up.children, 1);
  EXPECT_EQ(given_up.client_ids, Strings{"q"});
  // a@1 holds no claim and pushed no final partial: still waited for as if joined, to rejoin.
  EXPECT_FALSE(restored.AllDone());
}

TEST(ChildAggregatorsTest, DurableSequencesOnlyGrow) {
  ChildAggregators children("r");
  EXPECT_EQ(children.DurableSequence("a@1"), 0u);
  children.RecordPush("a@1", 1, false, {});
  children.RecordPush("a@1", 2, false, {});
  EXPECT_EQ(children.Sequences(), (std::vector<std::pair<std::string, uint64_t>>{{"a@1", 2}}));
  children.MarkDurable({{"a@1", 2}});
  children.MarkDurable({{"a@1", 1}});  // an older checkpoint's word, reported late
  EXPECT_EQ(children.DurableSequence("a@1"), 2u);
}

}  // namespace
}  // namespace fedagg
