// Client-id claims held by child aggregators as leases (docs/PROTOCOL.md 6.4): a client
// whose claim a child holds is told to wait, not that it was counted; the claim is covered
// when the child's partial carrying the update is merged; a child lost for the grace period
// (or replaced by a newer incarnation of its node) has its uncovered claims released, so
// their clients are accepted again, and it may push nothing more. Also: max_contributions
// across the tree, leases in checkpoints, and what a mirror reports up.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::ChildPartial;
using testing::Contribute;
using testing::CountingSpec;
using testing::NewCountingAggregation;
using testing::CountingUpdate;
using testing::ResultOf;

constexpr absl::Duration kGrace = absl::Seconds(30);

std::shared_ptr<Aggregation> RootAggregation(int64_t max_contributions = 0) {
  AggregationOptions options;
  options.child_grace = kGrace;
  return NewCountingAggregation("r", options, max_contributions);
}

// A claim of `child_id` for `client_id` at a node that decides alone (answered inline).
absl::Status Claim(Aggregation& aggregation, const std::string& child_id, const std::string& client_id) {
  absl::Status answer = absl::UnknownError("not answered");
  aggregation.ClaimForChild(child_id, client_id, [&answer](absl::Status granted) { answer = granted; });
  return answer;
}

uint64_t Join(Aggregation& aggregation, const std::string& child_id) {
  absl::StatusOr<Aggregation::ChildRegistration> joined = aggregation.ChildJoined(child_id, nullptr);
  EXPECT_TRUE(joined.ok()) << joined.status();
  return joined.ok() ? joined->join : 0;
}

TEST(AggregationLeasesTest, AClientHeldByAChildIsToldToWaitUntilThePartialCoversIt) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "alice").ok());

  const absl::Status held = root->BeginUpdate("alice");
  EXPECT_EQ(held.code(), absl::StatusCode::kAborted) << held;
  EXPECT_NE(held.message().find("has not delivered it yet"), absl::string_view::npos) << held;
  EXPECT_EQ(Claim(*root, "edge@2", "alice").code(), absl::StatusCode::kAborted);

  ASSERT_TRUE(root->MergeChildPartial("edge@1", 1, false, ChildPartial(*root, 7), {"alice"}).ok());
  EXPECT_EQ(root->BeginUpdate("alice").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Claim(*root, "edge@2", "alice").code(), absl::StatusCode::kAlreadyExists);
}

TEST(AggregationLeasesTest, AChildLostForTheGracePeriodHasItsUncoveredClaimsReleased) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  const uint64_t join = Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "delivered").ok());
  ASSERT_TRUE(Claim(*root, "edge@1", "lost").ok());
  ASSERT_TRUE(root->MergeChildPartial("edge@1", 1, false, ChildPartial(*root, 10), {"delivered"}).ok());
  root->ChildLeft("edge@1", join);

  root->Tick(absl::Now() + kGrace / 2);  // not lost yet: still held
  EXPECT_EQ(root->BeginUpdate("lost").code(), absl::StatusCode::kAborted);

  root->Tick(absl::Now() + kGrace);
  EXPECT_EQ(root->BeginUpdate("delivered").code(), absl::StatusCode::kAlreadyExists);  // covered: stays
  ASSERT_TRUE(root->BeginUpdate("lost").ok());  // released: the retry is accepted
  ASSERT_TRUE(root->CommitUpdate("lost", CountingUpdate(root->reduction(), 100)).ok());

  // The lost child may come back, but nothing of it is taken any more: its partial could
  // carry "lost" a second time.
  EXPECT_EQ(root->ChildJoined("edge@1", nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(root->MergeChildPartial("edge@1", 2, true, ChildPartial(*root, 1000), {"lost"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Claim(*root, "edge@1", "bob").code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(root->Seal().ok());
  EXPECT_EQ(root->state(), v1::FINALIZED);  // the lost child is not waited for
  EXPECT_EQ(ResultOf(*root), (std::vector<int64_t>{2, 110}));
}

TEST(AggregationLeasesTest, AChildThatRejoinsWithinTheGracePeriodKeepsItsClaims) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  const uint64_t join = Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "alice").ok());
  root->ChildLeft("edge@1", join);
  Join(*root, "edge@1");
  root->Tick(absl::Now() + 2 * kGrace);
  EXPECT_EQ(root->BeginUpdate("alice").code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(root->MergeChildPartial("edge@1", 1, true, ChildPartial(*root, 5), {"alice"}).ok());
  EXPECT_EQ(root->BeginUpdate("alice").code(), absl::StatusCode::kAlreadyExists);
}

// A child's stream ends (a link that dropped) after it claimed a client and acknowledged
// its update, and the aggregation is sealed before it rejoins: the seal waits for it
// instead of finalizing without the update it acknowledged.
TEST(AggregationLeasesTest, ASealWaitsForAChildWhoseStreamIsGoneWhileItHoldsClaims) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  const uint64_t join = Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "alice").ok());
  Contribute(*root, "bob", 2);
  root->ChildLeft("edge@1", join);
  ASSERT_TRUE(root->Seal().ok());
  root->Tick(absl::Now() + kGrace / 2);
  EXPECT_EQ(root->state(), v1::SEALED);  // alice's update is still the child's to deliver

  const absl::StatusOr<Aggregation::ChildRegistration> rejoined = root->ChildJoined("edge@1", nullptr);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_TRUE(rejoined->sealed);  // it learns of the seal as it joins, and pushes its final partial
  ASSERT_TRUE(root->MergeChildPartial("edge@1", 1, true, ChildPartial(*root, 5), {"alice"}).ok());
  EXPECT_EQ(root->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(*root), (std::vector<int64_t>{2, 7}));
}

// A child whose stream is gone and that holds no claim (it delivered everything) is not
// waited for.
TEST(AggregationLeasesTest, ASealDoesNotWaitForAGoneChildThatDeliveredEverything) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  const uint64_t join = Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "alice").ok());
  ASSERT_TRUE(root->MergeChildPartial("edge@1", 1, false, ChildPartial(*root, 5), {"alice"}).ok());
  root->ChildLeft("edge@1", join);
  ASSERT_TRUE(root->Seal().ok());
  EXPECT_EQ(root->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(*root), (std::vector<int64_t>{1, 5}));
}

TEST(AggregationLeasesTest, ANewerIncarnationOfTheSameNodeReleasesTheEarlierOnesClaimsAtOnce) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  const uint64_t join = Join(*root, "edge-a@100");
  Join(*root, "edge-b@100");
  ASSERT_TRUE(Claim(*root, "edge-a@100", "alice").ok());
  ASSERT_TRUE(Claim(*root, "edge-b@100", "bob").ok());
  root->ChildLeft("edge-a@100", join);  // killed; it restarts as edge-a@200
  Join(*root, "edge-a@200");
  ASSERT_TRUE(root->BeginUpdate("alice").ok());                        // released
  EXPECT_EQ(root->BeginUpdate("bob").code(), absl::StatusCode::kAborted);  // another node's: held
}

TEST(AggregationLeasesTest, ARejoiningIncarnationWhoseStreamIsUpIsNotReleased) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  Join(*root, "edge-a@100");
  ASSERT_TRUE(Claim(*root, "edge-a@100", "alice").ok());
  Join(*root, "edge-a@200");  // two live streams naming one node: neither is lost
  EXPECT_EQ(root->BeginUpdate("alice").code(), absl::StatusCode::kAborted);
}

TEST(AggregationLeasesTest, AGivenBackClaimIsFreeAndOnlyItsHolderMayGiveItBack) {
  std::shared_ptr<Aggregation> root = RootAggregation();
  Join(*root, "edge@1");
  ASSERT_TRUE(Claim(*root, "edge@1", "alice").ok());
  root->ReleaseChildClaim("edge@2", "alice");  // not its claim: ignored
  EXPECT_EQ(root->BeginUpdate("alice").code(), absl::StatusCode::kAborted);
  root->ReleaseChildClaim("edge@1", "alice");
  EXPECT_TRUE(root->BeginUpdate("alice").ok());
}

TEST(AggregationLeasesTest, MaxContributionsCountsTheClaimsOfChildrenAndTheirDeliveriesSeal) {
  std::shared_ptr<Aggregation> root = RootAggregation(/*max_contributions=*/3);
  const uint64_t join = Join(*root, "edge@1");
  Join(*root, "edge@2");
  ASSERT_TRUE(Claim(*root, "edge@1", "a").ok());
  ASSERT_TRUE(Claim(*root, "edge@2", "b").ok());
  Contribute(*root, "c", 3);
  EXPECT_EQ(root->BeginUpdate("d").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Claim(*root, "edge@2", "d").code(), absl::StatusCode::kResourceExhausted);

  root->ChildLeft("edge@1", join);
  root->Tick(absl::Now() + kGrace);  // "a" released: one place free again
  ASSERT_TRUE(Claim(*root, "edge@2", "d").ok());
  EXPECT_EQ(root->state(), v1::OPEN);
  ASSERT_TRUE(root->MergeChildPartial("edge@2", 1, false, ChildPartial(*root, 1), {"b"}).ok());
  EXPECT_EQ(root->state(), v1::OPEN);  // 2 of 3 delivered
  ASSERT_TRUE(root->MergeChildPartial("edge@2", 2, true, ChildPartial(*root, 4), {"d"}).ok());
  EXPECT_EQ(root->state(), v1::FINALIZED);  // the third delivered contribution sealed it
  EXPECT_EQ(ResultOf(*root), (std::vector<int64_t>{3, 8}));
}

TEST(AggregationLeasesTest, LeasesAndLostChildrenSurviveACheckpointRestore) {
  std::shared_ptr<Aggregation> original = RootAggregation();
  const uint64_t join = Join(*original, "gone@1");
  Join(*original, "edge@1");
  ASSERT_TRUE(Claim(*original, "gone@1", "x").ok());
  ASSERT_TRUE(Claim(*original, "edge@1", "held").ok());
  original->ChildLeft("gone@1", join);
  original->Tick(absl::Now() + kGrace);  // "gone@1" lost, "x" released
  ASSERT_TRUE(Claim(*original, "edge@1", "y").ok());
  ASSERT_TRUE(original->MergeChildPartial("edge@1", 1, false, ChildPartial(*original, 2), {"y"}).ok());
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = original->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value()) << snapshot.status();

  AggregationOptions options;
  options.child_grace = kGrace;
  absl::StatusOr<std::shared_ptr<Aggregation>> restored = Aggregation::Restore((*snapshot)->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  Aggregation& root = **restored;
  EXPECT_EQ(root.BeginUpdate("held").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(root.BeginUpdate("y").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(root.ChildJoined("gone@1", nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  // edge@1 does not come back after the restart: lost after the grace period from it.
  root.Tick(absl::Now() + kGrace);
  EXPECT_TRUE(root.BeginUpdate("held").ok());
}

// Records what a mirror asks of its parent; grants every claim at once.
class RecordingClaims final : public ClientClaims {
 public:
  void Claim(const std::string&, const std::string&, const std::string& client_id,
             std::function<void(absl::Status)> done) override {
    claimed.push_back(client_id);
    done(absl::OkStatus());
  }
  void Release(const std::string&, const std::string&, const std::string& client_id) override {
    released.push_back(client_id);
  }
  std::vector<std::string> claimed;
  std::vector<std::string> released;
};

std::shared_ptr<Aggregation> Mirror(RecordingClaims& claims) {
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(CountingSpec("r"));
  EXPECT_TRUE(config.ok()) << config.status();
  AggregationOptions options;
  options.child_grace = kGrace;
  options.forwarding = true;
  options.claims = &claims;
  auto mirror = std::make_shared<Aggregation>(*std::move(config), options);
  mirror->SetJoinedUpstream(true);
  return mirror;
}

// Sends client `client_id`'s update [1, 1] to `mirror` as a stream does: begun, validated,
// then counted once its claim at the parent is granted. Returns the commit's answer.
absl::StatusOr<int64_t> SendThroughClaims(Aggregation& mirror, const std::string& client_id) {
  if (absl::Status begun = mirror.BeginUpdate(client_id); !begun.ok()) return begun;
  absl::StatusOr<Aggregation::ValidatedUpdate> valid = mirror.Validate(CountingUpdate(mirror.reduction(), 1));
  if (!valid.ok()) return valid.status();
  absl::StatusOr<int64_t> committed = absl::UnknownError("not answered");
  mirror.ClaimAndCommit(client_id, *std::move(valid), [&committed](absl::StatusOr<int64_t> c) { committed = c; });
  return committed;
}

TEST(AggregationLeasesTest, AMirrorsDeltaNamesTheClientsItCarriesAndLostChildrenAreReleasedUpstream) {
  RecordingClaims claims;
  std::shared_ptr<Aggregation> mirror = Mirror(claims);
  const uint64_t join = Join(*mirror, "leaf@1");
  ASSERT_TRUE(Claim(*mirror, "leaf@1", "via-leaf").ok());
  ASSERT_TRUE(Claim(*mirror, "leaf@1", "stranded").ok());
  absl::StatusOr<int64_t> committed = SendThroughClaims(*mirror, "direct");
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE(mirror->MergeChildPartial("leaf@1", 1, false, ChildPartial(*mirror, 2), {"via-leaf"}).ok());

  absl::StatusOr<Aggregation::Delta> delta = mirror->TakeDelta(false);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->contributions, 2);
  EXPECT_EQ(delta->covered_client_ids, (std::vector<std::string>{"direct", "via-leaf"}));
  EXPECT_TRUE(mirror->TakeDelta(false)->covered_client_ids.empty());

  mirror->ChildLeft("leaf@1", join);
  mirror->Tick(absl::Now() + kGrace);
  EXPECT_EQ(claims.released, std::vector<std::string>{"stranded"});
}

TEST(AggregationLeasesTest, AMirrorAsksItsParentAboutAClientItAlreadyCounted) {
  RecordingClaims claims;
  std::shared_ptr<Aggregation> mirror = Mirror(claims);
  absl::StatusOr<int64_t> first = SendThroughClaims(*mirror, "alice");
  ASSERT_TRUE(first.ok()) << first.status();

  // Only the root knows whether alice's update reached it (this node may be lost before it
  // pushes): a retry here goes to the parent, which decides.
  const absl::StatusOr<int64_t> retry = SendThroughClaims(*mirror, "alice");
  EXPECT_EQ(claims.claimed, (std::vector<std::string>{"alice", "alice"}));
  // A parent that grants it anyway does not get it counted twice here; the grant goes back.
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kAlreadyExists) << retry.status();
  EXPECT_EQ(claims.released, std::vector<std::string>{"alice"});
  EXPECT_EQ(mirror->Status().contributions(), 1);
}

}  // namespace
}  // namespace fedagg
