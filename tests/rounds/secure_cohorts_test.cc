// A secure aggregation through its relays and its root, in one process: clients
// (SecAggClient) run the protocol's messages against the SecureCohorts of two leaf nodes,
// whose partials hold the masked updates and the cohorts' records; the leaves' partials
// merge as they would at an intermediate, and the root's UnmaskSecureSum makes the
// report the plain sum of exactly the clients counted — with dropouts at every stage,
// stage timeouts, a seal, refusals of messages out of turn, and a clean failure below
// the threshold; a graph derived from a threat model; and a checkpointed root's own
// cohort through a restart (completed: unmasked after it; open: failed at once).
#include <map>
#include <memory>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "service/core/partial_aggregate.h"
#include "service/core/update_buffer.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rounds/secure_cohorts.h"
#include "service/rounds/secure_unmasking.h"
#include "service/secagg/secagg_client.h"

namespace fedagg {
namespace {

constexpr int64_t kSecureCoordinates = 300;
constexpr double kSecureStep = 0.5;

// What one client's stream received.
class RecordingMember : public SecureCohorts::Member {
 public:
  void Send(const v1::CohortResponse& response) override { responses.push_back(response); }
  void Finish(const absl::Status& status) override { finished = status; }
  std::vector<v1::CohortResponse> responses;
  std::optional<absl::Status> finished;
};

std::shared_ptr<const ReductionSpec> SecureSpec(int bits) {
  return *ReductionSpec::Create(
      ValueType::Tensor(DType::kFloat32, {kSecureCoordinates}),
      {FieldIntrinsic{Intrinsic::kFederatedSum, false, ValueEncoding::Discretized(bits, kSecureStep), 0}},
      ReductionOptions{.secure = true});
}

struct SimulatedClient {
  std::string id;
  SecAggClient secagg;
  std::shared_ptr<RecordingMember> member = std::make_shared<RecordingMember>();
  std::vector<int32_t> input;
  std::optional<SecAggCohort> cohort;
};

// One leaf node's cohorts and its partial of the masked updates: cohorts of its own, or
// those of an aggregation, which then counts the masked updates (and takes the records).
class Leaf {
 public:
  Leaf(std::shared_ptr<const ReductionSpec> spec, const CohortFrame& frame, SecureCohortOptions options,
       const Key32& root_key)
      : spec_(spec),
        frame_(frame),
        own_cohorts_(std::make_unique<SecureCohorts>(frame, options, root_key)),
        cohorts_(*own_cohorts_),
        partial_(spec) {}
  Leaf(Aggregation& aggregation, const CohortFrame& frame)
      : spec_(aggregation.config().reduction),
        frame_(frame),
        cohorts_(*aggregation.secure_cohorts()),
        aggregation_(&aggregation),
        partial_(spec_) {}

  SecureCohorts& cohorts() { return cohorts_; }
  PartialAggregate& partial() { return partial_; }

  void Advertise(SimulatedClient& client, absl::Time now) {
    v1::AdvertiseKeys keys;
    keys.set_aggregation_id(frame_.aggregation_id);
    keys.set_client_id(client.id);
    keys.set_channel_public_key(BytesOf(client.secagg.keys().channel_public_key));
    keys.set_mask_public_key(BytesOf(client.secagg.keys().mask_public_key));
    ASSERT_TRUE(cohorts_.Advertise(client.id, keys, client.member, now).ok());
  }

  // Stage 1 from the roster the client got.
  void Share(SimulatedClient& client, absl::Time now) {
    ASSERT_FALSE(client.member->responses.empty());
    const v1::Roster& roster = client.member->responses.back().roster();
    absl::StatusOr<SecAggCohort> cohort = CohortOf(frame_, roster);
    ASSERT_TRUE(cohort.ok()) << cohort.status();
    client.cohort = *cohort;
    absl::StatusOr<std::vector<SharedKeys>> shares =
        client.secagg.ShareKeys(*client.cohort, static_cast<int>(roster.index()));
    ASSERT_TRUE(shares.ok()) << shares.status();
    v1::ShareKeys message;
    for (const SharedKeys& share : *shares) {
      v1::SealedShare& out = *message.add_shares();
      out.set_peer(static_cast<uint32_t>(share.to));
      out.set_sealed(share.sealed);
    }
    ASSERT_TRUE(cohorts_.ShareKeys(client.id, message, now).ok());
  }

  // Stage 2: the masked update, counted as an ordinary update is.
  void SendMaskedInput(SimulatedClient& client, absl::Time now) {
    ASSERT_TRUE(client.member->responses.back().has_shared_keys());
    std::vector<SharedKeys> received;
    const int index = IndexOf(client);
    for (const v1::SealedShare& share : client.member->responses.back().shared_keys().shares()) {
      received.push_back(SharedKeys{static_cast<int>(share.peer()), index, share.sealed()});
    }
    std::vector<uint32_t> plain(client.input.begin(), client.input.end());
    absl::StatusOr<std::vector<std::vector<uint32_t>>> masked =
        client.secagg.MaskInput(*client.cohort, received, {plain});
    ASSERT_TRUE(masked.ok()) << masked.status();
    const std::vector<std::byte> bytes = IntegerBytes((*masked)[0], frame_.bits);
    if (aggregation_ != nullptr) {  // gated by the aggregation's cohorts, counted as any update
      ASSERT_TRUE(aggregation_->BeginUpdate(client.id).ok());
      absl::StatusOr<UpdateBuffer> update = UpdateBuffer::Create(*spec_, {0}, std::nullopt, 1 << 20);
      ASSERT_TRUE(update.ok()) << update.status();
      const absl::Span<std::byte> values = update->section(0, UpdateBuffer::Section::kValues);
      ASSERT_EQ(values.size(), bytes.size());
      std::copy(bytes.begin(), bytes.end(), values.begin());
      ASSERT_TRUE(aggregation_->CommitUpdate(client.id, *std::move(update)).ok());
      return;
    }
    ASSERT_TRUE(cohorts_.BeginInput(client.id).ok());
    UpdateView update;
    update.fields.push_back(FieldValue{Encoding::kDense, DType::kFloat32, {}, absl::MakeConstSpan(bytes)});
    const absl::Status added = partial_.AccumulateValidatedBatch({update});
    cohorts_.EndInput(client.id, added.ok(), now);
    ASSERT_TRUE(added.ok()) << added;
  }

  // Stage 3.
  void Unmask(SimulatedClient& client, absl::Time now) {
    ASSERT_TRUE(client.member->responses.back().has_survivors());
    const auto& flags = client.member->responses.back().survivors().masked();
    absl::StatusOr<UnmaskingShares> shares = client.secagg.Unmask(*client.cohort, {flags.begin(), flags.end()});
    ASSERT_TRUE(shares.ok()) << shares.status();
    v1::UnmaskingShares message;
    message.set_sealed(shares->sealed);
    ASSERT_TRUE(cohorts_.Unmasking(client.id, message, now).ok());
  }

  // The records go into the partial, as a node does before its final push (an
  // aggregation's node takes them itself).
  void Record() {
    if (aggregation_ != nullptr) return;
    for (std::string& record : cohorts_.TakeRecords()) partial_.AddSecureCohort(std::move(record));
  }

  static int IndexOf(const SimulatedClient& client) {
    for (const v1::CohortResponse& response : client.member->responses) {
      if (response.has_roster()) return static_cast<int>(response.roster().index());
    }
    return -1;
  }

 private:
  std::shared_ptr<const ReductionSpec> spec_;
  CohortFrame frame_;
  std::unique_ptr<SecureCohorts> own_cohorts_;
  SecureCohorts& cohorts_;
  Aggregation* aggregation_ = nullptr;
  PartialAggregate partial_;
};

std::vector<SimulatedClient> MakeClients(int n, const std::string& prefix, std::mt19937_64& rng, int bits) {
  std::vector<SimulatedClient> clients;
  // Inputs small enough that the sum of all of them fits in b signed bits.
  const int32_t limit = bits == 8 ? 3 : 1000;
  std::uniform_int_distribution<int32_t> value(-limit, limit);
  for (int c = 0; c < n; ++c) {
    SimulatedClient client{prefix + std::to_string(c), *SecAggClient::Create()};
    for (int64_t i = 0; i < kSecureCoordinates; ++i) client.input.push_back(value(rng));
    clients.push_back(std::move(client));
  }
  return clients;
}

// The report is the plain sum of every client's input, to the bit.
void ExpectSumOfEveryInput(const AggregateResult& result, const std::vector<SimulatedClient>& clients) {
  const absl::Span<const float> values = result.fields[0].value.values<float>();
  for (int64_t i = 0; i < kSecureCoordinates; ++i) {
    int64_t sum = 0;
    for (const SimulatedClient& client : clients) sum += client.input[static_cast<size_t>(i)];
    ASSERT_EQ(values[i], static_cast<float>(static_cast<double>(sum) * kSecureStep)) << "coordinate " << i;
  }
}

struct Dropouts {
  std::set<int> before_sharing, before_input, before_unmasking;
};

// Runs one leaf's cohort of `clients` (which forms it: max_cohort of them) through every
// stage; those in `dropouts` leave at that stage, which then ends at its timeout.
void RunLeaf(Leaf& leaf, std::vector<SimulatedClient>& clients, const Dropouts& dropouts, absl::Time& now,
             absl::Duration timeout) {
  const auto end_stage_by_timeout = [&](const std::set<int>& dropped) {
    if (dropped.empty()) return;  // everyone answered: the stage ended already
    now += timeout;
    leaf.cohorts().Tick(now);
  };
  for (SimulatedClient& client : clients) leaf.Advertise(client, now);
  std::set<int> out;
  for (size_t c = 0; c < clients.size(); ++c) {
    if (!dropouts.before_sharing.count(static_cast<int>(c))) leaf.Share(clients[c], now);
  }
  end_stage_by_timeout(dropouts.before_sharing);
  out.insert(dropouts.before_sharing.begin(), dropouts.before_sharing.end());
  for (size_t c = 0; c < clients.size(); ++c) {
    if (!out.count(static_cast<int>(c)) && !dropouts.before_input.count(static_cast<int>(c))) {
      leaf.SendMaskedInput(clients[c], now);
    }
  }
  end_stage_by_timeout(dropouts.before_input);
  out.insert(dropouts.before_input.begin(), dropouts.before_input.end());
  for (size_t c = 0; c < clients.size(); ++c) {
    if (!out.count(static_cast<int>(c)) && !dropouts.before_unmasking.count(static_cast<int>(c))) {
      leaf.Unmask(clients[c], now);
    }
  }
  end_stage_by_timeout(dropouts.before_unmasking);
  EXPECT_TRUE(leaf.cohorts().Complete());
  leaf.Record();
}

class SecureCohortsTest : public ::testing::TestWithParam<int> {
 protected:
  int bits() const { return GetParam(); }
  std::shared_ptr<const ReductionSpec> spec_ = SecureSpec(GetParam());
  CohortFrame frame_ = CohortFrameOf(*spec_, "secure-round", "incarnation-1");
  SecAggUnmasker root_ = *SecAggUnmasker::Create();
  // Degree 16: even the client whose neighbours hold all six who do not answer the last
  // stage keeps enough answering neighbours (threshold 9), whatever the graph.
  SecureCohortOptions options_{.min_cohort = 3, .max_cohort = 1000, .degree = 16, .threshold = 0,
                               .stage_timeout = absl::Seconds(30)};
  absl::Time now_ = absl::FromUnixSeconds(1000000);
  std::mt19937_64 rng_{7};
};

TEST_P(SecureCohortsTest, TwoLeavesWithDropoutsAtEveryStageGiveThePlainSumAtTheRoot) {
  Leaf first(spec_, frame_, options_, root_.public_key());
  Leaf second(spec_, frame_, options_, root_.public_key());
  std::vector<SimulatedClient> a = MakeClients(20, "a", rng_, bits());
  std::vector<SimulatedClient> b = MakeClients(15, "b", rng_, bits());
  // The cohorts form at the advertise stage's timeout (fewer than max_cohort came).
  for (SimulatedClient& client : a) first.Advertise(client, now_);
  for (SimulatedClient& client : b) second.Advertise(client, now_);
  EXPECT_TRUE(a[0].member->responses.empty());
  now_ += options_.stage_timeout;
  first.cohorts().Tick(now_);
  second.cohorts().Tick(now_);
  ASSERT_EQ(a[0].member->responses.size(), 1u);
  EXPECT_EQ(a[0].member->responses[0].roster().members_size(), 20);
  EXPECT_EQ(a[0].member->responses[0].roster().threshold(), 9u);  // degree 16: 16 / 2 + 1

  // A client in a cohort already cannot advertise again.
  v1::AdvertiseKeys again;
  again.set_channel_public_key(std::string(32, 'k'));
  again.set_mask_public_key(std::string(32, 'k'));
  EXPECT_EQ(first.cohorts().Advertise(a[0].id, again, a[0].member, now_).code(), absl::StatusCode::kAlreadyExists);

  // Both cohorts through their stages.
  const Dropouts drop_a{{1, 2}, {3, 4}, {5, 6}};  // 10% at each stage
  const Dropouts drop_b{{0}, {7}, {14}};
  std::vector<int64_t> expected(kSecureCoordinates, 0);
  for (auto [leaf, clients, dropouts] : {std::tuple{&first, &a, &drop_a}, std::tuple{&second, &b, &drop_b}}) {
    for (size_t c = 0; c < clients->size(); ++c) {
      if (!dropouts->before_sharing.count(static_cast<int>(c))) leaf->Share((*clients)[c], now_);
    }
    // A masked update before the shares are handed out is refused.
    EXPECT_EQ(leaf->cohorts().BeginInput((*clients)[10].id).code(), absl::StatusCode::kFailedPrecondition);
  }
  now_ += options_.stage_timeout;
  first.cohorts().Tick(now_);
  second.cohorts().Tick(now_);
  EXPECT_EQ(a[1].member->finished->code(), absl::StatusCode::kDeadlineExceeded);  // never shared
  for (auto [leaf, clients, dropouts] : {std::tuple{&first, &a, &drop_a}, std::tuple{&second, &b, &drop_b}}) {
    for (size_t c = 0; c < clients->size(); ++c) {
      const int i = static_cast<int>(c);
      if (dropouts->before_sharing.count(i) || dropouts->before_input.count(i)) continue;
      leaf->SendMaskedInput((*clients)[c], now_);
      for (int64_t k = 0; k < kSecureCoordinates; ++k) expected[k] += (*clients)[c].input[k];
    }
    // The same client's update twice, and an unknown client's, are refused.
    EXPECT_EQ(leaf->cohorts().BeginInput((*clients)[10].id).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(leaf->cohorts().BeginInput("stranger").code(), absl::StatusCode::kFailedPrecondition);
  }
  now_ += options_.stage_timeout;
  first.cohorts().Tick(now_);
  second.cohorts().Tick(now_);
  for (auto [leaf, clients, dropouts] : {std::tuple{&first, &a, &drop_a}, std::tuple{&second, &b, &drop_b}}) {
    for (size_t c = 0; c < clients->size(); ++c) {
      const int i = static_cast<int>(c);
      if (dropouts->before_sharing.count(i) || dropouts->before_input.count(i) || dropouts->before_unmasking.count(i)) {
        continue;
      }
      leaf->Unmask((*clients)[c], now_);
    }
  }
  now_ += options_.stage_timeout;
  first.cohorts().Tick(now_);
  second.cohorts().Tick(now_);
  ASSERT_TRUE(first.cohorts().Complete());
  ASSERT_TRUE(second.cohorts().Complete());
  EXPECT_TRUE(a[0].member->finished->ok());
  EXPECT_EQ(a[5].member->finished->code(), absl::StatusCode::kDeadlineExceeded);  // did not unmask
  first.Record();
  second.Record();

  // An intermediate merges the two leaves' partials; the root unmasks the merged one.
  PartialAggregate merged(spec_);
  ASSERT_TRUE(merged.MergeWith(first.partial()).ok());
  ASSERT_TRUE(merged.MergeWith(second.partial()).ok());
  absl::StatusOr<std::string> wire = merged.Serialize();
  ASSERT_TRUE(wire.ok());
  absl::StatusOr<PartialAggregate> at_root = PartialAggregate::Deserialize(spec_, *wire);
  ASSERT_TRUE(at_root.ok()) << at_root.status();
  EXPECT_EQ(at_root->secure_cohorts().size(), 2u);
  ASSERT_TRUE(UnmaskSecureSum(frame_, root_, *at_root).ok());
  absl::StatusOr<AggregateResult> result = at_root->Report();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->contributions, 20 - 4 + 15 - 2);
  const absl::Span<const float> values = result->fields[0].value.values<float>();
  for (int64_t i = 0; i < kSecureCoordinates; ++i) {
    ASSERT_EQ(values[i], static_cast<float>(static_cast<double>(expected[i]) * kSecureStep)) << "coordinate " << i;
  }
}

TEST_P(SecureCohortsTest, TooFewAnswersAtTheLastStageFailTheUnmaskingNamingTheCohort) {
  Leaf leaf(spec_, frame_, SecureCohortOptions{.min_cohort = 4, .max_cohort = 6, .degree = 4, .threshold = 3},
            root_.public_key());
  std::vector<SimulatedClient> clients = MakeClients(6, "c", rng_, bits());
  RunLeaf(leaf, clients, Dropouts{{}, {}, {0, 1, 2, 3}}, now_, absl::Seconds(30));
  absl::Status unmasked = UnmaskSecureSum(frame_, root_, leaf.partial());
  EXPECT_EQ(unmasked.code(), absl::StatusCode::kFailedPrecondition) << unmasked;
  EXPECT_NE(unmasked.message().find("secure cohort"), std::string::npos) << unmasked;
}

TEST_P(SecureCohortsTest, TooFewSharesEndTheCohortBeforeAnythingIsCounted) {
  Leaf leaf(spec_, frame_, SecureCohortOptions{.min_cohort = 4, .max_cohort = 5, .degree = 4, .threshold = 3},
            root_.public_key());
  std::vector<SimulatedClient> clients = MakeClients(5, "c", rng_, bits());
  for (SimulatedClient& client : clients) leaf.Advertise(client, now_);  // the fifth forms it
  leaf.Share(clients[0], now_);
  leaf.Share(clients[1], now_);
  leaf.Share(clients[2], now_);  // three shared: the threshold, no more
  now_ += absl::Seconds(30);
  leaf.cohorts().Tick(now_);
  for (SimulatedClient& client : clients) {
    ASSERT_TRUE(client.member->finished.has_value());
    EXPECT_EQ(client.member->finished->code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_TRUE(leaf.cohorts().Complete());
  EXPECT_TRUE(leaf.cohorts().TakeRecords().empty());
  // Nothing was counted; the clients may join again (a new cohort).
  leaf.Advertise(clients[0], now_);
}

TEST_P(SecureCohortsTest, ASealClosesTheMaskingStageAndDropsCohortsNotFormed) {
  Leaf leaf(spec_, frame_, SecureCohortOptions{.min_cohort = 3, .max_cohort = 4, .degree = 4, .threshold = 0},
            root_.public_key());
  std::vector<SimulatedClient> clients = MakeClients(6, "c", rng_, bits());
  for (int c = 0; c < 4; ++c) leaf.Advertise(clients[c], now_);  // forms at max_cohort
  for (int c = 0; c < 4; ++c) leaf.Share(clients[c], now_);       // all shared: stage 2 at once
  leaf.Advertise(clients[4], now_);                                // waits for a cohort
  for (int c = 0; c < 2; ++c) leaf.SendMaskedInput(clients[c], now_);
  ASSERT_TRUE(leaf.cohorts().BeginInput(clients[2].id).ok());      // being counted when the seal comes
  leaf.cohorts().Seal(now_);
  EXPECT_EQ(clients[4].member->finished->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(clients[0].member->responses.back().has_survivors());  // waits for the input in flight
  // Closing, the stage takes no new input meanwhile.
  EXPECT_EQ(leaf.cohorts().BeginInput(clients[3].id).code(), absl::StatusCode::kFailedPrecondition);
  leaf.cohorts().EndInput(clients[2].id, /*counted=*/false, now_);
  ASSERT_TRUE(clients[0].member->responses.back().has_survivors());
  const auto& masked = clients[0].member->responses.back().survivors().masked();
  EXPECT_EQ(std::vector<bool>(masked.begin(), masked.end()), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(clients[3].member->finished->code(), absl::StatusCode::kDeadlineExceeded);
  v1::AdvertiseKeys late;
  late.set_channel_public_key(std::string(32, 'k'));
  late.set_mask_public_key(std::string(32, 'k'));
  EXPECT_EQ(leaf.cohorts().Advertise(clients[5].id, late, clients[5].member, now_).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(SecureCohortsTest, MessagesOutOfTurnOrToStrangersAreRefused) {
  Leaf leaf(spec_, frame_, SecureCohortOptions{.min_cohort = 3, .max_cohort = 5, .degree = 2, .threshold = 0},
            root_.public_key());
  std::vector<SimulatedClient> clients = MakeClients(5, "c", rng_, bits());
  v1::UnmaskingShares early;
  early.set_sealed("x");
  for (SimulatedClient& client : clients) leaf.Advertise(client, now_);
  EXPECT_EQ(leaf.cohorts().Unmasking(clients[0].id, early, now_).code(), absl::StatusCode::kFailedPrecondition);
  const v1::Roster& roster = clients[0].member->responses.back().roster();
  absl::StatusOr<SecAggCohort> cohort = CohortOf(frame_, roster);
  ASSERT_TRUE(cohort.ok());
  // Degree 2: a share to a member that is not a neighbour, and a missing one.
  int stranger = -1;
  for (int m = 0; m < 5; ++m) {
    if (m != static_cast<int>(roster.index()) && !cohort->graph.AreNeighbours(m, static_cast<int>(roster.index()))) {
      stranger = m;
    }
  }
  ASSERT_GE(stranger, 0);
  v1::ShareKeys wrong;
  wrong.add_shares()->set_peer(static_cast<uint32_t>(stranger));
  EXPECT_EQ(leaf.cohorts().ShareKeys(clients[0].id, wrong, now_).code(), absl::StatusCode::kInvalidArgument);
  v1::ShareKeys too_few;
  too_few.add_shares()->set_peer(
      static_cast<uint32_t>(cohort->graph.NeighboursOf(static_cast<int>(roster.index()))[0]));
  EXPECT_EQ(leaf.cohorts().ShareKeys(clients[0].id, too_few, now_).code(), absl::StatusCode::kInvalidArgument);
  leaf.Share(clients[0], now_);
  EXPECT_EQ(leaf.cohorts().ShareKeys(clients[0].id, too_few, now_).code(), absl::StatusCode::kFailedPrecondition);
  v1::AdvertiseKeys short_keys;
  short_keys.set_channel_public_key("short");
  EXPECT_EQ(leaf.cohorts().Advertise("new", short_keys, clients[0].member, now_).code(),
            absl::StatusCode::kInvalidArgument);
}

// Two float32[4] fields, discretized to `bits` each unless told otherwise.
v1::AggregationSpec SecureSpecProto(int bits_a = 16, int bits_b = 16) {
  v1::AggregationSpec spec;
  spec.set_aggregation_id("secure");
  *spec.mutable_value_type() = ValueTypeToProto(ValueType::Struct(
      {{"a", ValueType::Tensor(DType::kFloat32, {4})}, {"b", ValueType::Tensor(DType::kFloat32, {4})}}));
  for (int bits : {bits_a, bits_b}) {
    v1::FieldIntrinsic& field = *spec.add_intrinsics();
    field.set_intrinsic(v1::FEDERATED_SUM);
    field.mutable_encoding()->set_kind(v1::FieldEncoding::DISCRETIZED);
    field.mutable_encoding()->set_bits(static_cast<uint32_t>(bits));
    field.mutable_encoding()->set_scale(0.01);
  }
  spec.mutable_secure();
  return spec;
}

TEST(SecureSpecTest, BadSecureSpecsAreRefusedSayingWhy) {
  const auto refusal = [](const v1::AggregationSpec& spec) {
    absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(config.status().message());
  };
  absl::StatusOr<AggregationConfig> good = ConfigFromProto(SecureSpecProto());
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->reduction->options().secure);
  EXPECT_EQ(good->reduction->fields()[1].modulus_bits, 16);

  v1::AggregationSpec plain = SecureSpecProto();
  plain.mutable_intrinsics(0)->clear_encoding();
  EXPECT_NE(refusal(plain).find("DISCRETIZED"), std::string::npos);
  v1::AggregationSpec sparse = SecureSpecProto();
  sparse.mutable_intrinsics(1)->set_intrinsic(v1::SPARSE_SUM);
  EXPECT_NE(refusal(sparse).find("federated_sum or federated_mean"), std::string::npos);
  EXPECT_NE(refusal(SecureSpecProto(16, 32)).find("one bit width"), std::string::npos);
  v1::AggregationSpec private_too = SecureSpecProto();
  private_too.mutable_privacy()->set_clip_norm(1);
  EXPECT_NE(refusal(private_too).find("differential privacy"), std::string::npos);
  v1::AggregationSpec odd = SecureSpecProto();
  odd.mutable_secure()->set_degree(5);
  EXPECT_NE(refusal(odd).find("even"), std::string::npos);
  v1::AggregationSpec threshold_alone = SecureSpecProto();
  threshold_alone.mutable_secure()->set_threshold(3);
  EXPECT_NE(refusal(threshold_alone).find("declare both"), std::string::npos);
  v1::AggregationSpec half = SecureSpecProto();
  half.mutable_secure()->set_degree(8);
  half.mutable_secure()->set_threshold(4);
  EXPECT_NE(refusal(half).find("(degree / 2, degree]"), std::string::npos);
  v1::AggregationSpec small = SecureSpecProto();
  small.mutable_secure()->set_degree(8);
  small.mutable_secure()->set_threshold(5);
  small.mutable_secure()->set_min_cohort(5);
  EXPECT_NE(refusal(small).find("must exceed the threshold"), std::string::npos);
  small.mutable_secure()->set_min_cohort(6);
  EXPECT_TRUE(ConfigFromProto(small).ok());
  v1::AggregationSpec bounds = SecureSpecProto();
  bounds.mutable_secure()->set_min_cohort(10);
  bounds.mutable_secure()->set_max_cohort(5);
  EXPECT_NE(refusal(bounds).find("max_cohort"), std::string::npos);
}

TEST(SecureSpecTest, AThreatModelDerivesEachCohortsGraphOrIsRefusedSayingWhy) {
  const auto refusal = [](const v1::AggregationSpec& spec) {
    absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(config.status().message());
  };
  v1::AggregationSpec derived = SecureSpecProto();
  derived.mutable_secure()->set_dropout_rate(0.1);
  derived.mutable_secure()->set_max_cohort(60);
  ASSERT_TRUE(ConfigFromProto(derived).ok()) << ConfigFromProto(derived).status();
  v1::AggregationSpec declared_too = derived;
  declared_too.mutable_secure()->set_degree(8);
  EXPECT_NE(refusal(declared_too).find("leave them 0"), std::string::npos);
  v1::AggregationSpec too_many = derived;
  too_many.mutable_secure()->set_adversarial_rate(0.5);
  too_many.mutable_secure()->set_dropout_rate(0.3);
  EXPECT_NE(refusal(too_many).find("dropout"), std::string::npos) << refusal(too_many);
  v1::AggregationSpec out_of_range = derived;
  out_of_range.mutable_secure()->set_dropout_rate(1.0);
  EXPECT_NE(refusal(out_of_range).find("[0, 1)"), std::string::npos) << refusal(out_of_range);

  // A cohort of 40 under that threat model gets the derived graph in its roster, and its
  // sum with 10% leaving at the last stage comes out exact.
  const std::shared_ptr<const ReductionSpec> spec = SecureSpec(16);
  const CohortFrame frame = CohortFrameOf(*spec, "derived", "incarnation-1");
  const SecAggUnmasker root = *SecAggUnmasker::Create();
  SecureCohortOptions options = SecureCohortOptionsFromProto(derived.secure());
  options.max_cohort = 40;
  const CohortGraphParameters expected = *GraphParametersFor(40, 0, 0.1);
  ASSERT_LT(expected.degree, 39);  // sparser than the complete graph: the derivation shows
  Leaf leaf(spec, frame, options, root.public_key());
  std::mt19937_64 rng(11);
  std::vector<SimulatedClient> clients = MakeClients(40, "d", rng, 16);
  absl::Time now = absl::FromUnixSeconds(1000000);
  RunLeaf(leaf, clients, Dropouts{{}, {}, {3, 17, 29, 38}}, now, options.stage_timeout);
  const v1::Roster& roster = clients[0].member->responses.front().roster();
  EXPECT_EQ(static_cast<int>(roster.degree()), expected.degree);
  EXPECT_EQ(static_cast<int>(roster.threshold()), expected.threshold);
  ASSERT_TRUE(UnmaskSecureSum(frame, root, leaf.partial()).ok());
  absl::StatusOr<AggregateResult> result = leaf.partial().Report();
  ASSERT_TRUE(result.ok());
  ExpectSumOfEveryInput(*result, clients);
}

TEST(SecureSpecTest, TheRootSetsItsKeyAndEveryNodeRelaysThroughCohorts) {
  AggregationRegistry registry(AggregationOptions{});
  v1::AggregationSpec spec = SecureSpecProto();
  spec.mutable_secure()->set_root_public_key(std::string(32, 'x'));  // replaced
  absl::StatusOr<std::shared_ptr<Aggregation>> created = registry.Create(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string& key = (*created)->config().proto.secure().root_public_key();
  ASSERT_EQ(key.size(), 32u);
  EXPECT_NE(key, std::string(32, 'x'));
  ASSERT_NE((*created)->config().secure_unmasker, nullptr);
  EXPECT_EQ(BytesOf((*created)->config().secure_unmasker->public_key()), key);
  ASSERT_NE((*created)->secure_cohorts(), nullptr);
  // An update from a client in no cohort is refused before anything is reserved.
  EXPECT_EQ((*created)->BeginUpdate("nobody").code(), absl::StatusCode::kFailedPrecondition);
}

// A checkpointed root running a cohort of its own clients (max_cohort 6, complete graph).
std::shared_ptr<Aggregation> SecureRoot(AggregationRegistry& registry, const std::string& id) {
  v1::AggregationSpec spec;
  spec.set_aggregation_id(id);
  *spec.mutable_value_type() = ValueTypeToProto(ValueType::Tensor(DType::kFloat32, {kSecureCoordinates}));
  v1::FieldIntrinsic& field = *spec.add_intrinsics();
  field.set_intrinsic(v1::FEDERATED_SUM);
  *field.mutable_encoding() = ValueEncodingToProto(ValueEncoding::Discretized(16, kSecureStep));
  spec.mutable_secure()->set_max_cohort(6);
  absl::StatusOr<std::shared_ptr<Aggregation>> created = registry.Create(spec);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : nullptr;
}

TEST(SecureRestartTest, ARestoredRootGoesOnWithItsCompletedCohortAndFailsWithAnOpenOne) {
  AggregationOptions options;
  options.checkpointed = true;
  AggregationRegistry registry(options);
  std::mt19937_64 rng(5);
  // The test's clock runs ahead of the aggregation's, which closes the masking stage at
  // the real time of the last count: a stage timeout from the test's now is then past.
  absl::Time now = absl::Now() + absl::Minutes(1);
  const absl::Duration timeout = absl::Seconds(30);

  // A cohort complete when the checkpoint is taken: its record goes into the checkpoint
  // beside its masked updates, with the key, and the restored root unmasks them.
  std::shared_ptr<Aggregation> done = SecureRoot(registry, "restart-done");
  ASSERT_NE(done, nullptr);
  Leaf at_done(*done, CohortFrameOf(*done->config().reduction, "restart-done", done->config().proto.incarnation()));
  std::vector<SimulatedClient> clients = MakeClients(6, "d", rng, 16);
  RunLeaf(at_done, clients, Dropouts{{}, {}, {2}}, now, timeout);
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = done->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value()) << snapshot.status();
  ASSERT_TRUE((*snapshot)->checkpoint.secure_root_key.has_value());
  // A key that is not the spec's (a checkpoint mixed up with another's) is refused.
  AggregationCheckpoint other_key = (*snapshot)->checkpoint;
  other_key.secure_root_key = SecAggUnmasker::Create()->private_key();
  EXPECT_EQ(Aggregation::Restore(other_key, options).status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<std::shared_ptr<Aggregation>> restored = Aggregation::Restore((*snapshot)->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Status().state(), v1::OPEN) << (*restored)->Status().detail();
  ASSERT_TRUE((*restored)->Seal().ok());
  ASSERT_EQ((*restored)->Status().state(), v1::FINALIZED) << (*restored)->Status().detail();
  absl::StatusOr<std::shared_ptr<const AggregateResult>> result = (*restored)->Result();
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSumOfEveryInput(**result, clients);

  // A cohort with its masked updates counted but its last stage not over: the restored
  // root can never unmask them, and says so at once.
  std::shared_ptr<Aggregation> open = SecureRoot(registry, "restart-open");
  ASSERT_NE(open, nullptr);
  Leaf at_open(*open, CohortFrameOf(*open->config().reduction, "restart-open", open->config().proto.incarnation()));
  std::vector<SimulatedClient> others = MakeClients(6, "o", rng, 16);
  for (SimulatedClient& client : others) at_open.Advertise(client, now);
  for (SimulatedClient& client : others) at_open.Share(client, now);
  for (SimulatedClient& client : others) at_open.SendMaskedInput(client, now);
  ASSERT_EQ(open->Status().contributions(), 6);
  snapshot = open->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value()) << snapshot.status();
  restored = Aggregation::Restore((*snapshot)->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->Status().state(), v1::FAILED);
  EXPECT_NE((*restored)->Status().detail().find("restarted while cohorts it ran itself were open; 6 masked updates"),
            std::string::npos)
      << (*restored)->Status().detail();
}

INSTANTIATE_TEST_SUITE_P(Bits, SecureCohortsTest, ::testing::Values(8, 16, 32),
                         [](const ::testing::TestParamInfo<int>& info) { return absl::StrCat(info.param, "Bits"); });

}  // namespace
}  // namespace fedagg
