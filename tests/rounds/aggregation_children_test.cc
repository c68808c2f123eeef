// An aggregation's child aggregators: who is waited for after a seal and who gets SEAL,
// when children join, leave and rejoin — also when the end of an old Join stream is seen
// only after the child has joined again (a parent that was frozen or cut off sees both at
// once when it comes back).
#include <vector>

#include "gtest/gtest.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::ChildPartial;
using testing::CountingSpec;
using testing::ResultOf;

// Child grace of an hour: a test that finalizes did not wait for it.
std::unique_ptr<Aggregation> WaitingAggregation() {
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(CountingSpec("r"));
  EXPECT_TRUE(config.ok()) << config.status();
  AggregationOptions options;
  options.child_grace = absl::Hours(1);
  return std::make_unique<Aggregation>(*std::move(config), options);
}

// Records the commands sent over one Join stream.
struct JoinStream {
  std::vector<Aggregation::ChildCommand> received;
  Aggregation::ChildNotifier notifier() {
    return [this](Aggregation::ChildCommand command) { received.push_back(command); };
  }
};

TEST(AggregationChildrenTest, TheEndOfAnOlderJoinLeavesTheRejoinedChildWaitedFor) {
  std::unique_ptr<Aggregation> aggregation = WaitingAggregation();
  JoinStream old_stream, new_stream;
  const Aggregation::ChildRegistration first = *aggregation->ChildJoined("edge@1", old_stream.notifier());
  ASSERT_TRUE(aggregation->MergeChildPartial("edge@1", 1, false, ChildPartial(*aggregation, 10)).ok());
  const Aggregation::ChildRegistration second = *aggregation->ChildJoined("edge@1", new_stream.notifier());
  EXPECT_NE(first.join, second.join);
  EXPECT_EQ(second.last_sequence, 1u);
  aggregation->ChildLeft("edge@1", first.join);  // the old stream's end, seen late

  ASSERT_TRUE(aggregation->Seal().ok());
  EXPECT_TRUE(old_stream.received.empty());
  EXPECT_EQ(new_stream.received, std::vector<Aggregation::ChildCommand>{Aggregation::ChildCommand::kSeal});
  EXPECT_EQ(aggregation->state(), v1::SEALED);  // waits for the rejoined child's final push
  ASSERT_TRUE(aggregation->MergeChildPartial("edge@1", 2, true, ChildPartial(*aggregation, 200)).ok());
  EXPECT_EQ(aggregation->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{2, 210}));
}

TEST(AggregationChildrenTest, AChildWhoseLatestJoinEndedIsNotWaitedFor) {
  std::unique_ptr<Aggregation> aggregation = WaitingAggregation();
  JoinStream old_stream, new_stream;
  ASSERT_TRUE(aggregation->ChildJoined("edge@1", old_stream.notifier()).ok());
  const Aggregation::ChildRegistration latest = *aggregation->ChildJoined("edge@1", new_stream.notifier());
  ASSERT_TRUE(aggregation->MergeChildPartial("edge@1", 1, false, ChildPartial(*aggregation, 10)).ok());
  aggregation->ChildLeft("edge@1", latest.join);

  ASSERT_TRUE(aggregation->Seal().ok());
  EXPECT_TRUE(new_stream.received.empty());
  EXPECT_EQ(aggregation->state(), v1::FINALIZED);  // what it pushed stays counted
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{1, 10}));
}

}  // namespace
}  // namespace fedagg
