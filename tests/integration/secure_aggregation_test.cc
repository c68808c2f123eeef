// Secure aggregation through real servers: a root and two intermediates on loopback gRPC,
// clients (ContributeSecurely) joining cohorts at the intermediates, with dropouts at
// every stage; the root's result is the plain sum of exactly the updates counted, to the
// bit; an intermediate lost after its cohort completed loses that cohort whole; a root
// restarted from its checkpoint keeps its key and unmasks every completed cohort, and one
// whose checkpoint lacks the key fails the aggregation at once. Also: an update
// sent plainly to a secure aggregation is refused, a client not in a cohort is refused, and
// the roster's root key must be the root's.
#include <functional>
#include <thread>
#include <vector>

#include "client_stub/secure_contribution.h"
#include "gtest/gtest.h"
#include "service/rounds/checkpoint_file.h"
#include "tests/integration/test_cluster.h"
#include "tests/temp_dir.h"

namespace fedagg::testing {
namespace {

constexpr int64_t kSecureWidth = 500;
constexpr double kSecureStep = 0.25;  // values are whole steps: discretizing them is exact

v1::AggregationSpec SecureSumSpec(const std::string& id, int cohort) {
  v1::AggregationSpec spec = MakeSpec(id, {{"w", absl::StrCat("float32[", kSecureWidth, "]"),
                                            Intrinsic::kFederatedSum}});
  v1::FieldEncoding& encoding = *spec.mutable_intrinsics(0)->mutable_encoding();
  encoding.set_kind(v1::FieldEncoding::DISCRETIZED);
  encoding.set_bits(16);
  encoding.set_scale(kSecureStep);
  spec.mutable_secure()->set_max_cohort(static_cast<uint32_t>(cohort));
  spec.mutable_secure()->set_stage_timeout_ms(10000);  // stages end sooner: when all answered
  return spec;
}

// Client c's values: whole steps in [-20, 20].
std::vector<float> ValuesOf(int c) {
  std::vector<float> values(kSecureWidth);
  for (int64_t i = 0; i < kSecureWidth; ++i) {
    values[static_cast<size_t>(i)] = static_cast<float>(((c * 7 + i * 3) % 41 - 20) * kSecureStep);
  }
  return values;
}

// The exact sum of clients first .. first + count - 1.
std::vector<double> ExactSumOf(int first, int count) {
  std::vector<double> expected(kSecureWidth, 0.0);
  for (int c = first; c < first + count; ++c) {
    const std::vector<float> values = ValuesOf(c);
    for (int64_t i = 0; i < kSecureWidth; ++i) expected[static_cast<size_t>(i)] += values[static_cast<size_t>(i)];
  }
  return expected;
}

// Seals `id` at the root and expects it FINALIZED with `contributions` updates summing to
// `expected`, to the bit.
void SealAndExpectSecureSum(ControlClient& control, const std::string& id, int64_t contributions,
                            const std::vector<double>& expected) {
  ASSERT_TRUE(control.Seal(id).ok());
  absl::StatusOr<v1::AggregationStatus> final_status = control.WatchUntilFinal(id);
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  ASSERT_EQ(final_status->state(), v1::FINALIZED) << final_status->detail();
  EXPECT_EQ(final_status->contributions(), contributions);
  absl::StatusOr<AggregateResult> result = control.GetResult(id);
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Span<const float> sum = result->fields[0].value.values<float>();
  for (int64_t i = 0; i < kSecureWidth; ++i) {
    ASSERT_EQ(sum[static_cast<size_t>(i)], static_cast<float>(expected[static_cast<size_t>(i)])) << "coordinate " << i;
  }
}

// Runs `count` clients, client-`first` on, through the node at `port`, concurrently;
// client first + k leaves at leave(k). Their statuses (CANCELLED for those that left).
std::vector<absl::Status> RunClients(int port, const v1::AggregationSpec& spec, int first, int count,
                                     const std::function<SecureDropout(int)>& leave = {}) {
  std::vector<absl::Status> outcomes(static_cast<size_t>(count));
  std::vector<std::thread> clients;
  for (int k = 0; k < count; ++k) {
    clients.emplace_back([&, k] {
      std::shared_ptr<grpc::Channel> channel = Connect(port);
      const std::string client_id = absl::StrCat("client-", first + k);
      absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(channel, client_id);
      if (!stream.ok()) {
        outcomes[static_cast<size_t>(k)] = stream.status();
        return;
      }
      const std::vector<float> values = ValuesOf(first + k);
      SecureContributionOptions options;
      options.pinned_root_key = spec.secure().root_public_key();
      if (leave) options.dropout = leave(k);
      outcomes[static_cast<size_t>(k)] =
          ContributeSecurely(channel, **stream, spec, client_id, UpdateView{{FieldValue::Dense<float>(values)}},
                             options)
              .status();
      (void)(*stream)->Close();
    });
  }
  for (std::thread& client : clients) client.join();
  return outcomes;
}

TEST(SecureAggregationTest, ThroughTwoIntermediatesWithDropoutsTheRootGetsThePlainSum) {
  ServerConfig config = LoopbackConfig();
  config.child_grace = absl::Seconds(3);
  std::unique_ptr<Cluster> cluster = Cluster::Start(2, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  absl::StatusOr<v1::AggregationStatus> created = control.Create(SecureSumSpec("secure-tree", 8));
  ASSERT_TRUE(created.ok()) << created.status();
  const v1::AggregationSpec& spec = created->spec();
  ASSERT_EQ(spec.secure().root_public_key().size(), 32u);

  // Eight clients at each intermediate form one cohort there; at each, one leaves before
  // sharing, one before its masked update, one before unmasking.
  constexpr int kPerNode = 8;
  const auto leave = [](int k) {
    return k == 0 ? SecureDropout::kBeforeSharing
           : k == 1 ? SecureDropout::kBeforeInput
           : k == 2 ? SecureDropout::kBeforeUnmasking
                    : SecureDropout::kNone;
  };
  std::vector<absl::Status> outcomes(2 * kPerNode);
  std::thread second([&] {
    const std::vector<absl::Status> at_second =
        RunClients(cluster->intermediates[1]->port(), spec, kPerNode, kPerNode, leave);
    std::copy(at_second.begin(), at_second.end(), outcomes.begin() + kPerNode);
  });
  const std::vector<absl::Status> at_first = RunClients(cluster->intermediates[0]->port(), spec, 0, kPerNode, leave);
  std::copy(at_first.begin(), at_first.end(), outcomes.begin());
  second.join();
  std::vector<double> expected(kSecureWidth, 0.0);
  for (int c = 0; c < 2 * kPerNode; ++c) {
    const int k = c % kPerNode;
    if (k == 0 || k == 1 || k == 2) {
      EXPECT_EQ(outcomes[c].code(), absl::StatusCode::kCancelled) << "client " << c << ": " << outcomes[c];
    } else {
      EXPECT_TRUE(outcomes[c].ok()) << "client " << c << ": " << outcomes[c];
    }
    if (k == 0 || k == 1) continue;  // not in the sum; client 2's update is (it only left before unmasking)
    const std::vector<float> values = ValuesOf(c);
    for (int64_t i = 0; i < kSecureWidth; ++i) expected[static_cast<size_t>(i)] += values[static_cast<size_t>(i)];
  }

  SealAndExpectSecureSum(control, "secure-tree", 2 * (kPerNode - 2), expected);
}

TEST(SecureAggregationTest, ALostIntermediateLosesItsCohortAndNothingElse) {
  ServerConfig config = LoopbackConfig();
  config.child_grace = absl::Seconds(2);
  std::unique_ptr<Cluster> cluster = Cluster::Start(2, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  absl::StatusOr<v1::AggregationStatus> created = control.Create(SecureSumSpec("secure-loss", 4));
  ASSERT_TRUE(created.ok()) << created.status();
  for (const absl::Status& outcome : RunClients(cluster->intermediates[0]->port(), created->spec(), 0, 4)) {
    EXPECT_TRUE(outcome.ok()) << outcome;
  }
  for (const absl::Status& outcome : RunClients(cluster->intermediates[1]->port(), created->spec(), 4, 4)) {
    EXPECT_TRUE(outcome.ok()) << outcome;
  }
  // The second intermediate's cohort completed, but its partial had not gone up (a secure
  // aggregation's goes up once, at the end): losing the node loses that cohort whole.
  cluster->intermediates[1].reset();
  SealAndExpectSecureSum(control, "secure-loss", 4, ExactSumOf(0, 4));
}

// A root restarted on its port from its checkpoint directory.
std::unique_ptr<FedaggServer> RestartRoot(std::unique_ptr<FedaggServer> root, ServerConfig config) {
  const int port = root->port();
  root->Shutdown(absl::Milliseconds(100));  // checkpoints what it holds
  root.reset();
  config.listen_address = absl::StrCat("127.0.0.1:", port);
  absl::StatusOr<std::unique_ptr<FedaggServer>> restarted = FedaggServer::Start(config);
  EXPECT_TRUE(restarted.ok()) << restarted.status();
  return restarted.ok() ? *std::move(restarted) : nullptr;
}

TEST(SecureAggregationTest, ARestartedRootKeepsItsKeyAndUnmasksEveryCompletedCohort) {
  TempDir dir;
  ServerConfig config = LoopbackConfig();
  config.child_grace = absl::Seconds(10);
  ServerConfig root_config = config;
  root_config.checkpoint_dir = dir.path();
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, root_config);
  ASSERT_NE(cluster, nullptr);
  const int root_port = cluster->root->port();
  config.parent_address = absl::StrCat("127.0.0.1:", root_port);
  config.node_id = "intermediate-0";
  absl::StatusOr<std::unique_ptr<FedaggServer>> intermediate = FedaggServer::Start(config);
  ASSERT_TRUE(intermediate.ok()) << intermediate.status();
  absl::StatusOr<v1::AggregationStatus> created =
      ControlClient(Connect(root_port)).Create(SecureSumSpec("secure-restart", 4));
  ASSERT_TRUE(created.ok()) << created.status();
  // A cohort at the root itself and one at the intermediate, both complete.
  for (const absl::Status& outcome : RunClients(root_port, created->spec(), 0, 4)) EXPECT_TRUE(outcome.ok()) << outcome;
  for (const absl::Status& outcome : RunClients((*intermediate)->port(), created->spec(), 4, 4)) {
    EXPECT_TRUE(outcome.ok()) << outcome;
  }

  // The root restarts: its checkpoint holds its key and its own cohort's record, and the
  // intermediate's cohort has not gone up yet (it goes up once, after the seal).
  cluster->root = RestartRoot(std::move(cluster->root), root_config);
  ASSERT_NE(cluster->root, nullptr);
  ASSERT_EQ(cluster->root->restored_aggregations(), 1);
  ControlClient control(Connect(root_port));
  SealAndExpectSecureSum(control, "secure-restart", 8, ExactSumOf(0, 8));
}

TEST(SecureAggregationTest, ARestartedRootWithoutItsKeyFailsTheAggregationAtOnceSayingWhy) {
  TempDir dir;
  ServerConfig config = LoopbackConfig();
  config.checkpoint_dir = dir.path();
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int root_port = cluster->root->port();
  absl::StatusOr<v1::AggregationStatus> created =
      ControlClient(Connect(root_port)).Create(SecureSumSpec("secure-keyless", 4));
  ASSERT_TRUE(created.ok()) << created.status();
  for (const absl::Status& outcome : RunClients(root_port, created->spec(), 0, 4)) EXPECT_TRUE(outcome.ok()) << outcome;
  const int port = cluster->root->port();
  cluster->root->Shutdown(absl::Milliseconds(100));
  cluster->root.reset();
  // The checkpoint as a version that did not keep the key wrote it: the masked updates
  // are there, the key that opens their unmasking shares is not.
  const std::string name = CheckpointFileName("secure-keyless");
  absl::StatusOr<AggregationCheckpoint> checkpoint = ReadCheckpointFile(dir.path() + "/" + name);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(checkpoint->secure_root_key.has_value());
  checkpoint->secure_root_key.reset();
  ASSERT_TRUE(WriteFileAtomically(dir.path(), name, EncodeCheckpoint(*checkpoint)).ok());
  config.listen_address = absl::StrCat("127.0.0.1:", port);
  absl::StatusOr<std::unique_ptr<FedaggServer>> restarted = FedaggServer::Start(config);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  // Failed at once, not at the end of a round that could never be unmasked.
  absl::StatusOr<v1::AggregationStatus> status = ControlClient(Connect(port)).Get("secure-keyless");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), v1::FAILED);
  EXPECT_NE(status->detail().find("does not hold the key"), std::string::npos) << status->detail();
}

TEST(SecureAggregationTest, PlainUpdatesStrangersAndAnotherRootKeyAreRefused) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  std::shared_ptr<grpc::Channel> channel = Connect(cluster->root->port());
  ControlClient control(channel);
  absl::StatusOr<v1::AggregationStatus> created = control.Create(SecureSumSpec("secure-refusals", 3));
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(channel, "plain-client");
  ASSERT_TRUE(stream.ok());
  const std::vector<float> values = ValuesOf(1);
  // An update sent plainly, by a client in no cohort: refused, nothing counted.
  absl::StatusOr<v1::Ack> plain =
      (*stream)->Contribute(created->spec(), UpdateView{{FieldValue::Dense<float>(values)}});
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kFailedPrecondition) << plain.status();
  EXPECT_NE(plain.status().message().find("JoinCohort"), std::string::npos) << plain.status();
  // A client told of another root key refuses the roster (it never shares a secret).
  SecureContributionOptions options;
  options.pinned_root_key = std::string(32, 'r');
  options.timeout = absl::Seconds(20);
  std::vector<std::thread> others;
  absl::Status pinned;
  for (int c = 0; c < 3; ++c) {
    others.emplace_back([&, c] {
      const std::string id = absl::StrCat("pinned-", c);
      absl::StatusOr<std::unique_ptr<ContributeStream>> own = ContributeStream::Open(channel, id);
      ASSERT_TRUE(own.ok());
      SecureContributionOptions mine = options;
      if (c != 0) mine.pinned_root_key.clear();
      absl::StatusOr<v1::Ack> ack =
          ContributeSecurely(channel, **own, created->spec(), id, UpdateView{{FieldValue::Dense<float>(values)}}, mine);
      if (c == 0) pinned = ack.status();
    });
  }
  for (std::thread& other : others) other.join();
  EXPECT_EQ(pinned.code(), absl::StatusCode::kPermissionDenied) << pinned;
}

}  // namespace
}  // namespace fedagg::testing
