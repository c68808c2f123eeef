// Differential privacy through the tree: updates clipped where they are received (at a
// mirror too), partials going up un-noised, the noise added once at the root, and a
// checkpointed root publishing its noised result only once a checkpoint holds it, so that
// a restart publishes the same result rather than a second draw of noise.
#include <cmath>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::ValueOrDie;

constexpr int64_t kCoordinates = 2000;
constexpr int kClients = 4;

// <w=float64[2000]> federated_mean, clipped to 1, z = 1 (sigma 1), 4 expected clients.
AggregationConfig PrivateConfig() {
  v1::AggregationSpec spec;
  spec.set_aggregation_id("dp");
  *spec.mutable_value_type() = ValueTypeToProto(ValueType::Tensor(DType::kFloat64, {kCoordinates}));
  spec.add_intrinsics()->set_intrinsic(v1::FEDERATED_MEAN);
  spec.set_min_contributions(1);
  v1::DifferentialPrivacy* privacy = spec.mutable_privacy();
  privacy->set_clip_norm(1.0);
  privacy->set_noise_multiplier(1.0);
  privacy->set_expected_clients(kClients);
  return ValueOrDie(ConfigFromProto(spec));
}

// An update adding 10 to coordinate 0: its norm, 10, is clipped to 1.
void Contribute(Aggregation& aggregation, const std::string& client_id) {
  UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(aggregation.reduction(), {0}, std::nullopt, 1 << 20));
  std::vector<double> values(kCoordinates, 0.0);
  values[0] = 10;
  std::memcpy(update.section(0, UpdateBuffer::Section::kValues).data(), values.data(), values.size() * sizeof(double));
  ASSERT_TRUE(aggregation.BeginUpdate(client_id).ok());
  absl::StatusOr<int64_t> counted = aggregation.CommitUpdate(client_id, std::move(update));
  ASSERT_TRUE(counted.ok()) << counted.status();
}

AggregationOptions Checkpointed() {
  AggregationOptions options;
  options.checkpointed = true;
  options.child_grace = absl::ZeroDuration();
  return options;
}

// A root that writes checkpoints, sealed after the clients' updates: its noised result is
// made and waits for a checkpoint to hold it.
std::shared_ptr<Aggregation> SealedCheckpointedRoot(const AggregationOptions& options) {
  auto root = std::make_shared<Aggregation>(PrivateConfig(), options);
  for (int i = 0; i < kClients; ++i) Contribute(*root, absl::StrCat("client-", i));
  EXPECT_TRUE(root->Seal().ok());
  return root;
}

std::vector<double> ValuesOf(const AggregateResult& result) {
  absl::Span<const double> values = result.fields.at(0).value.values<double>();
  return {values.begin(), values.end()};
}

// An intermediate's final partial of two clients, as the root decodes it; checks that it
// holds their clipped updates exactly, with no noise.
PartialAggregate MirrorPartial(Aggregation& root, const std::string& first, const std::string& second) {
  AggregationOptions options;
  options.forwarding = true;
  Aggregation mirror(PrivateConfig(), options);
  mirror.SetJoinedUpstream(true);
  Contribute(mirror, first);
  Contribute(mirror, second);
  Aggregation::Delta delta = ValueOrDie(mirror.TakeDelta(true));
  PartialAggregate partial = ValueOrDie(PartialAggregate::Deserialize(root.config().reduction, delta.bytes));
  EXPECT_EQ(partial.clipped_updates(), 2);
  const AggregateResult sums = ValueOrDie(partial.Report());
  const std::vector<double> values = ValuesOf(sums);
  EXPECT_NEAR(values[0], 2.0, 1e-6);  // two clipped updates, summed (a private mean runs as its sum)
  int64_t noised = 0;
  for (int64_t i = 1; i < kCoordinates; ++i) noised += values[static_cast<size_t>(i)] != 0.0;
  EXPECT_EQ(noised, 0) << "a mirror's partial must carry no noise";
  ByteReader in(delta.bytes);
  return ValueOrDie(root.DecodeChildPartial(first, in));
}

// The noise on a published mean: (mean * expected clients) minus the clipped sum, over
// the coordinates: its standard deviation must be sigma = 1 (2,000 samples: relative sd
// 1.6%; 6 sd).
void ExpectNoisedOnce(const AggregateResult& result) {
  ASSERT_TRUE(result.privacy.has_value());
  EXPECT_EQ(result.privacy->clipped_updates, kClients);
  const std::vector<double> means = ValuesOf(result);
  double sum_squares = 0;
  for (size_t i = 0; i < means.size(); ++i) {
    const double noise = means[i] * kClients - (i == 0 ? kClients : 0);
    sum_squares += noise * noise;
  }
  EXPECT_NEAR(std::sqrt(sum_squares / kCoordinates), 1.0, 6 * std::sqrt(0.5 / kCoordinates));
}

TEST(AggregationPrivacyTest, IntermediatesForwardClippedSumsAndTheRootNoisesOnce) {
  Aggregation root(PrivateConfig(), AggregationOptions{});
  ASSERT_TRUE(root.MergeChildPartial("edge-a", 1, true, MirrorPartial(root, "c1", "c2")).ok());
  ASSERT_TRUE(root.MergeChildPartial("edge-a", 1, true, MirrorPartial(root, "c1", "c2")).ok());  // a retried push
  ASSERT_TRUE(root.MergeChildPartial("edge-b", 1, true, MirrorPartial(root, "c3", "c4")).ok());
  ASSERT_TRUE(root.Seal().ok());
  ASSERT_EQ(root.state(), v1::FINALIZED);
  std::shared_ptr<const AggregateResult> result = ValueOrDie(root.Result());
  EXPECT_EQ(result->contributions, kClients);
  ExpectNoisedOnce(*result);
  EXPECT_EQ(root.Status().privacy().clipped_updates(), kClients);
  EXPECT_GE(root.Status().privacy().noise_stddev(), 1.0);
}

TEST(AggregationPrivacyTest, ACheckpointedRootPublishesOnlyWhatACheckpointHoldsAndARestartTheSame) {
  const AggregationOptions options = Checkpointed();
  std::shared_ptr<Aggregation> root = SealedCheckpointedRoot(options);
  // Made, not published: no result until a checkpoint holds it.
  EXPECT_EQ(root->state(), v1::SEALED);
  EXPECT_FALSE(root->Result().ok());
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = root->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value());
  const AggregationCheckpoint& checkpoint = (*snapshot)->checkpoint;
  EXPECT_EQ(checkpoint.state, v1::FINALIZED);
  ASSERT_TRUE(checkpoint.noise_key.has_value());

  // A root restarted from that checkpoint publishes a result...
  const AggregationCheckpoint decoded = ValueOrDie(DecodeCheckpoint(EncodeCheckpoint(checkpoint)));
  std::shared_ptr<Aggregation> restored = ValueOrDie(Aggregation::Restore(decoded, options));
  ASSERT_EQ(restored->state(), v1::FINALIZED);
  std::shared_ptr<const AggregateResult> after_restart = ValueOrDie(restored->Result());
  ExpectNoisedOnce(*after_restart);

  // ...the very one the original publishes once told the checkpoint is on disk.
  root->MarkDurable(**snapshot);
  ASSERT_EQ(root->state(), v1::FINALIZED);
  std::shared_ptr<const AggregateResult> published = ValueOrDie(root->Result());
  EXPECT_EQ(ValuesOf(*published), ValuesOf(*after_restart));
}

TEST(AggregationPrivacyTest, AResultWaitingForItsCheckpointIsNeitherDrawnAgainNorChanged) {
  const AggregationOptions options = Checkpointed();
  std::shared_ptr<Aggregation> root = SealedCheckpointedRoot(options);
  absl::StatusOr<std::optional<Aggregation::Snapshot>> first = root->TakeSnapshot();
  ASSERT_TRUE(first.ok() && first->has_value());
  // The ticker finds it sealed: no second finalization, so the same version and key.
  root->Tick(absl::Now() + absl::Seconds(1));
  absl::StatusOr<std::optional<Aggregation::Snapshot>> second = root->TakeSnapshot();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->version, (*first)->version);
  ASSERT_TRUE((*second)->checkpoint.noise_key.has_value());
  EXPECT_EQ((*second)->checkpoint.noise_key->bytes, (*first)->checkpoint.noise_key->bytes);
  // A late child's partial would change the sum the noise was drawn for: refused.
  PartialAggregate late(root->config().reduction);
  EXPECT_EQ(root->MergeChildPartial("late", 1, true, std::move(late)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  root->MarkDurable(**first);
  EXPECT_EQ(root->state(), v1::FINALIZED);
}

TEST(AggregationPrivacyTest, AResultNoCheckpointCanHoldIsNeverPublished) {
  // Checkpoints stop (shutdown, a failed snapshot) while the noised result waits: FAILED,
  // and no result, rather than a result a restart could draw again.
  std::shared_ptr<Aggregation> root = SealedCheckpointedRoot(Checkpointed());
  ASSERT_EQ(root->state(), v1::SEALED);
  root->StopDurability();
  EXPECT_EQ(root->state(), v1::FAILED);
  EXPECT_THAT(std::string(root->Status().detail()), ::testing::HasSubstr("not published"));
  EXPECT_FALSE(root->Result().ok());
}

TEST(AggregationPrivacyTest, AnUpdateThatCannotBeClippedIsRefusedAndNotCounted) {
  Aggregation root(PrivateConfig(), AggregationOptions{});
  UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(root.reduction(), {0}, std::nullopt, 1 << 20));
  std::vector<double> values(kCoordinates, 0.0);
  values[3] = NAN;
  std::memcpy(update.section(0, UpdateBuffer::Section::kValues).data(), values.data(), values.size() * sizeof(double));
  ASSERT_TRUE(root.BeginUpdate("nan").ok());
  absl::StatusOr<int64_t> counted = root.CommitUpdate("nan", std::move(update));
  EXPECT_EQ(counted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.Status().contributions(), 0);
  Contribute(root, "nan");  // the client may send a corrected update
  EXPECT_EQ(root.Status().contributions(), 1);
}

}  // namespace
}  // namespace fedagg
