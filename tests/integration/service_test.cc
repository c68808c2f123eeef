// Integration tests: real fedagg servers on loopback (a root, and intermediate
// aggregators under it), real gRPC clients; results checked against the core's reference.
#include <random>
#include <thread>

#include "service/backend/backend_choice.h"
#include "service/core/reference_reducer.h"
#include "tests/integration/raw_streams.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

// One client's values for a spec, owning the memory its UpdateView points into.
struct OwnedUpdate {
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<int32_t>> int32s;
  std::vector<std::vector<int64_t>> indices;
  UpdateView view;
};

// Random values for every field of `spec` (dense, sparse or row-sparse as declared).
OwnedUpdate RandomUpdate(const ReductionSpec& spec, std::mt19937_64& rng) {
  OwnedUpdate u;
  const size_t n = spec.fields().size();
  u.floats.resize(n);
  u.ints.resize(n);
  u.int32s.resize(n);
  u.indices.resize(n);
  std::uniform_real_distribution<float> value(-2, 2);
  std::uniform_int_distribution<int64_t> small(-50, 50);
  for (size_t f = 0; f < n; ++f) {
    const FieldSpec& field = spec.fields()[f];
    int64_t count = field.type.num_elements();
    if (field.encoding != Encoding::kDense) {
      const int64_t nnz = std::uniform_int_distribution<int64_t>(0, std::min<int64_t>(field.rows, 6))(rng);
      for (int64_t k = 0; k < nnz; ++k) {
        u.indices[f].push_back(std::uniform_int_distribution<int64_t>(0, field.rows - 1)(rng));
      }
      count = nnz * field.row_width;
    }
    switch (field.type.dtype) {
      case DType::kFloat32:
        for (int64_t i = 0; i < count; ++i) u.floats[f].push_back(value(rng));
        u.view.fields.push_back(FieldValue{field.encoding, field.type.dtype, u.indices[f],
                                           AsBytes(absl::MakeConstSpan(u.floats[f]))});
        break;
      case DType::kInt64:
        for (int64_t i = 0; i < count; ++i) u.ints[f].push_back(small(rng));
        u.view.fields.push_back(FieldValue{field.encoding, field.type.dtype, u.indices[f],
                                           AsBytes(absl::MakeConstSpan(u.ints[f]))});
        break;
      case DType::kInt32:
        for (int64_t i = 0; i < count; ++i) u.int32s[f].push_back(static_cast<int32_t>(small(rng)));
        u.view.fields.push_back(FieldValue{field.encoding, field.type.dtype, u.indices[f],
                                           AsBytes(absl::MakeConstSpan(u.int32s[f]))});
        break;
      default:
        ADD_FAILURE() << "test helper does not generate " << DTypeName(field.type.dtype);
    }
  }
  if (spec.has_weighted_field()) u.view.weight = std::uniform_real_distribution<double>(0.5, 20)(rng);
  return u;
}

std::vector<UpdateView> Views(const std::vector<OwnedUpdate>& updates) {
  std::vector<UpdateView> views;
  for (const OwnedUpdate& u : updates) views.push_back(u.view);
  return views;
}

UpdateView DenseFloats(const std::vector<float>& values) {
  return UpdateView{{FieldValue::Dense<float>(values)}, std::nullopt};
}

// Seals at the root and waits for the final state.
v1::AggregationStatus SealAndWait(ControlClient& control, const std::string& id) {
  EXPECT_TRUE(control.Seal(id).ok());
  absl::StatusOr<v1::AggregationStatus> final = control.WatchUntilFinal(id);
  EXPECT_TRUE(final.ok()) << final.status();
  return final.ok() ? *final : v1::AggregationStatus();
}

int64_t Contributions(ControlClient& control, const std::string& id) {
  absl::StatusOr<v1::AggregationStatus> status = control.Get(id);
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? status->contributions() : -1;
}

TEST(ServiceTest, DenseSumAtTheRoot) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("dense-sum", {{"w", "float32[8]", Intrinsic::kFederatedSum}}, 3);
  ASSERT_TRUE(control.Create(spec).ok());

  std::vector<float> expected(8, 0.0f);
  for (int c = 0; c < 3; ++c) {
    auto stream = ContributeStream::Open(Connect(cluster->root->port()), absl::StrCat("client-", c));
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_EQ((*stream)->welcome().open_aggregations_size(), 1);
    std::vector<float> values(8);
    for (int i = 0; i < 8; ++i) values[i] = static_cast<float>(c * 10 + i);
    for (int i = 0; i < 8; ++i) expected[i] += values[i];
    absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(spec, DenseFloats(values));
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->contributions(), c + 1);
    EXPECT_TRUE((*stream)->Close().ok());
  }
  const v1::AggregationStatus final = SealAndWait(control, "dense-sum");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("dense-sum");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 3);
  ASSERT_EQ(result->fields.size(), 1u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(result->fields[0].value.values<float>()[i], expected[i]);
}

// The client library sends each field in the encoding it declares, whatever it is given
// (client_stub/encoding_conversion.h): a dense array for a sparse_mean field over a
// Contribute stream (its zeros not touched), a sparse pair for a dense field over Submit.
TEST(ServiceTest, TheClientLibrarySendsWhatEachFieldDeclares) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec(
      "any-encoding", {{"w", "float32[4]", Intrinsic::kFederatedSum}, {"ids", "float32[4]", Intrinsic::kSparseMean}}, 2);
  ASSERT_TRUE(control.Create(spec).ok());

  const std::vector<int64_t> w_indices = {3, 0, 3};
  const std::vector<float> w_values = {1, 2, 4};
  const std::vector<float> ids_dense = {0, 6, 0, 2};
  auto stream = ContributeStream::Open(Connect(cluster->root->port()), "dense-for-sparse");
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(
      spec, UpdateView{{FieldValue::Sparse<float>(w_indices, w_values), FieldValue::Dense<float>(ids_dense)},
                       std::nullopt});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE((*stream)->Close().ok());

  const std::vector<float> w_dense = {1, 1, 1, 1};
  const std::vector<int64_t> ids_indices = {1};
  const std::vector<float> ids_values = {2};
  ack = SubmitUpdate(Connect(cluster->root->port()), "sparse-for-dense", spec,
                     UpdateView{{FieldValue::Dense<float>(w_dense), FieldValue::Sparse<float>(ids_indices, ids_values)},
                                std::nullopt});
  ASSERT_TRUE(ack.ok()) << ack.status();

  const v1::AggregationStatus final = SealAndWait(control, "any-encoding");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("any-encoding");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->fields.size(), 2u);
  const absl::Span<const float> w = result->fields[0].value.values<float>();
  const absl::Span<const float> ids = result->fields[1].value.values<float>();
  EXPECT_EQ(std::vector<float>(w.begin(), w.end()), (std::vector<float>{3, 1, 1, 6}));
  EXPECT_EQ(std::vector<float>(ids.begin(), ids.end()), (std::vector<float>{0, 4, 0, 2}));  // (6 + 2) / 2, 2 / 1
}

// A root and two intermediates, all on `config`'s backend, 30 random updates of five
// fields (dense, row-sparse, sparse union, integer, weighted COO) sent to all three at
// once: the result equals the float64 reference.
void CheckTreeMatchesReference(const ServerConfig& config) {
  auto cluster = Cluster::Start(2, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec =
      MakeSpec("tree", {{"w", "float32[4,3]", Intrinsic::kFederatedWeightedMean},
                        {"embedding", "float32[10,2]", Intrinsic::kRowSparseMean, true},
                        {"tokens", "int64[100]", Intrinsic::kSparseSumSparse, true},
                        {"hist", "int32[5]", Intrinsic::kFederatedSum},
                        {"coo", "float32[50]", Intrinsic::kSparseWeightedMean, true}},
               /*min_contributions=*/30);
  ASSERT_TRUE(control.Create(spec).ok());
  std::shared_ptr<const ReductionSpec> reduction = ReductionOf(spec);

  const uint64_t seed = std::random_device()();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::vector<OwnedUpdate> updates;
  for (int i = 0; i < 30; ++i) updates.push_back(RandomUpdate(*reduction, rng));

  // Three senders at once: clients 0, 3, 6... go to the root, the others to the two
  // intermediate aggregators.
  std::vector<int> ports = {cluster->root->port(), cluster->intermediates[0]->port(),
                            cluster->intermediates[1]->port()};
  std::vector<std::thread> senders;
  std::atomic<int> acked{0};
  for (int s = 0; s < 3; ++s) {
    senders.emplace_back([&, s] {
      for (size_t i = s; i < updates.size(); i += 3) {
        auto stream = ContributeStream::Open(Connect(ports[s]), absl::StrCat("client-", i));
        ASSERT_TRUE(stream.ok()) << stream.status();
        absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(spec, updates[i].view);
        ASSERT_TRUE(ack.ok()) << "client " << i << ": " << ack.status();
        ++acked;
      }
    });
  }
  for (std::thread& t : senders) t.join();
  ASSERT_EQ(acked.load(), 30);

  const v1::AggregationStatus final = SealAndWait(control, "tree");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  EXPECT_EQ(final.contributions(), 30);
  EXPECT_EQ(final.children(), 2);
  absl::StatusOr<AggregateResult> result = control.GetResult("tree");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 30);
  const double error = MaxRelativeError(ReferenceReduce(*reduction, Views(updates)), *result);
  EXPECT_LE(error, 1e-5);
}

TEST(ServiceTest, TreeOfTwoIntermediatesMatchesTheReference) {
  CheckTreeMatchesReference(LoopbackConfig());
}

// The same on the backend made of the CUDA backend's reduction code, run on the CPU.
TEST(ServiceTest, TreeOnTheThrustOmpBackendMatchesTheReference) {
  absl::StatusOr<BackendChoice> backend = ChooseBackend("thrust-omp");
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();
  ServerConfig config = LoopbackConfig();
  config.backend = backend->backend;
  CheckTreeMatchesReference(config);
}

// And on three simulated devices: batches spread over them, merged at every Serialize
// (intermediates forwarding partials) and Report (the root's result).
TEST(ServiceTest, TreeOnThreeSimulatedThrustOmpDevicesMatchesTheReference) {
  absl::StatusOr<BackendChoice> backend = ChooseBackend("thrust-omp", BackendOptions{.devices = std::vector<int>{0, 1, 2}});
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();
  ServerConfig config = LoopbackConfig();
  config.backend = backend->backend;
  CheckTreeMatchesReference(config);
}

TEST(ServiceTest, TwoAggregationsOverlapOnOneStream) {
  auto cluster = Cluster::Start(1);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec round1 = MakeSpec("round-1", {{"w", "float32[3]", Intrinsic::kFederatedMean}});
  const v1::AggregationSpec round2 = MakeSpec("round-2", {{"w", "float32[3]", Intrinsic::kFederatedMax}});
  ASSERT_TRUE(control.Create(round1).ok());
  ASSERT_TRUE(control.Create(round2).ok());
  absl::StatusOr<std::vector<v1::AggregationSpec>> tasks = control.GetTasks("anyone", 5);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].aggregation_id(), "round-1");  // oldest first

  for (int c = 0; c < 4; ++c) {
    auto stream = ContributeStream::Open(Connect(cluster->intermediates[0]->port()), absl::StrCat("c", c));
    ASSERT_TRUE(stream.ok()) << stream.status();
    const std::vector<float> values = {static_cast<float>(c), 1.0f, -static_cast<float>(c)};
    ASSERT_TRUE((*stream)->Contribute(round1, DenseFloats(values)).ok());
    ASSERT_TRUE((*stream)->Contribute(round2, DenseFloats(values)).ok());
  }
  // The task path hands out only what a client has not contributed to yet (at the node it
  // contributed through: exactly-once accounting is per node).
  ControlClient intermediate(Connect(cluster->intermediates[0]->port()));
  absl::StatusOr<std::vector<v1::AggregationSpec>> c0_tasks = intermediate.GetTasks("c0", 5);
  ASSERT_TRUE(c0_tasks.ok()) << c0_tasks.status();
  EXPECT_TRUE(c0_tasks->empty());
  ASSERT_EQ(SealAndWait(control, "round-1").state(), v1::FINALIZED);
  // round-2 still open after round-1 finalized.
  EXPECT_EQ(control.Get("round-2")->state(), v1::OPEN);
  ASSERT_EQ(SealAndWait(control, "round-2").state(), v1::FINALIZED);

  absl::StatusOr<AggregateResult> mean = control.GetResult("round-1");
  absl::StatusOr<AggregateResult> max = control.GetResult("round-2");
  ASSERT_TRUE(mean.ok() && max.ok());
  EXPECT_FLOAT_EQ(mean->fields[0].value.values<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(mean->fields[0].value.values<float>()[2], -1.5f);
  EXPECT_FLOAT_EQ(max->fields[0].value.values<float>()[0], 3.0f);
  EXPECT_FLOAT_EQ(max->fields[0].value.values<float>()[2], 0.0f);
}

TEST(ServiceTest, SubmitPathCountsLikeTheStream) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("submit", {{"w", "float32[2]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(spec).ok());
  const std::vector<float> values = {1.0f, 2.0f};
  absl::StatusOr<v1::Ack> ack = SubmitUpdate(Connect(cluster->root->port()), "browser-1", spec, DenseFloats(values));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);
  // The same client again, over the stream: counted once.
  auto stream = ContributeStream::Open(Connect(cluster->root->port()), "browser-1");
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ((*stream)->Contribute(spec, DenseFloats(values)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SubmitUpdate(Connect(cluster->root->port()), "browser-1", spec, DenseFloats(values)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Contributions(control, "submit"), 1);
}

TEST(ServiceTest, OldFinishedAggregationsAreForgotten) {
  ServerConfig config = LoopbackConfig();
  config.retain_finished = 2;
  config.finished_grace = absl::ZeroDuration();
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  for (int round = 0; round < 4; ++round) {
    const std::string id = absl::StrCat("round-", round);
    ASSERT_TRUE(control.Create(MakeSpec(id, {{"w", "float32[1]", Intrinsic::kFederatedSum}})).ok());
    ASSERT_TRUE(control.Cancel(id, "test").ok());
  }
  ASSERT_TRUE(control.Create(MakeSpec("open", {{"w", "float32[1]", Intrinsic::kFederatedSum}})).ok());
  // The ticker forgets round-0 and round-1; the open one is never forgotten.
  // (Bounded wait, generous for a loaded machine: the ticker runs on its own schedule; at
  // most 5 s, half the 10 s grace that would keep them if the config's did not reach it.)
  for (int i = 0; i < 500 && (control.Get("round-0").ok() || control.Get("round-1").ok()); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(control.Get("round-0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(control.Get("round-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(control.Get("round-2").ok());
  EXPECT_TRUE(control.Get("round-3").ok());
  EXPECT_TRUE(control.Get("open").ok());
}

TEST(ServiceTest, DeadlineBelowQuorumFails) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  v1::AggregationSpec spec = MakeSpec("late", {{"w", "float32[2]", Intrinsic::kFederatedSum}}, 5);
  spec.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Milliseconds(300)));
  ASSERT_TRUE(control.Create(spec).ok());
  auto stream = ContributeStream::Open(Connect(cluster->root->port()), "only-one");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Contribute(spec, DenseFloats({1.0f, 1.0f})).ok());
  absl::StatusOr<v1::AggregationStatus> final = control.WatchUntilFinal("late");
  ASSERT_TRUE(final.ok()) << final.status();
  EXPECT_EQ(final->state(), v1::FAILED);
  EXPECT_NE(final->detail().find("quorum not reached: 1 contributions"), std::string::npos) << final->detail();
  EXPECT_EQ(control.GetResult("late").status().code(), absl::StatusCode::kFailedPrecondition);
}

// One push of a partial larger than a chunk that covers more client ids than the margin of
// the parent's message limit (as a secure aggregation's single push does): every chunk
// fits, and the root counts them all.
TEST(ServiceTest, AFinalPushOfALargePartialCoveringManyLongClientIdsIsDelivered) {
  ServerConfig config = LoopbackConfig();
  config.forward_interval = absl::Hours(1);  // everything goes up with the final push
  auto cluster = Cluster::Start(1, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  constexpr int64_t kWidth = 600000;  // float64: a 4.8 MB partial
  constexpr int kClients = 40;        // 40 ids of 3,000 bytes: 120 KB of ids
  const v1::AggregationSpec spec =
      MakeSpec("wide-push", {{"w", absl::StrCat("float64[", kWidth, "]"), Intrinsic::kFederatedSum}}, kClients);
  ASSERT_TRUE(control.Create(spec).ok());
  std::vector<double> values(kWidth);
  for (int64_t i = 0; i < kWidth; ++i) values[static_cast<size_t>(i)] = static_cast<double>(i % 7);
  for (int c = 0; c < kClients; ++c) {
    auto stream = ContributeStream::Open(Connect(cluster->intermediates[0]->port()),
                                         absl::StrCat(std::string(3000, 'x'), "-", c));
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<double>(values)}, std::nullopt}).ok());
  }
  const v1::AggregationStatus final = SealAndWait(control, "wide-push");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  EXPECT_EQ(final.contributions(), kClients);
  absl::StatusOr<AggregateResult> result = control.GetResult("wide-push");
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Span<const double> sum = result->fields[0].value.values<double>();
  for (int64_t i = 0; i < kWidth; ++i) {
    ASSERT_EQ(sum[static_cast<size_t>(i)], kClients * static_cast<double>(i % 7)) << "coordinate " << i;
  }
}

TEST(ServiceTest, KilledIntermediateLosesOnlyWhatItHadNotForwarded) {
  ServerConfig config = LoopbackConfig();
  config.forward_interval = absl::Hours(1);  // nothing goes up before the seal
  config.child_grace = absl::Seconds(3);
  auto cluster = Cluster::Start(2, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("survivor", {{"w", "int64[4]", Intrinsic::kFederatedSum}}, 2);
  ASSERT_TRUE(control.Create(spec).ok());

  std::vector<int64_t> expected(4, 0);
  auto send = [&](int port, const std::string& client, int64_t base, bool counted) {
    auto stream = ContributeStream::Open(Connect(port), client);
    ASSERT_TRUE(stream.ok()) << stream.status();
    const std::vector<int64_t> values = {base, base + 1, base + 2, base + 3};
    ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>(values)}, std::nullopt}).ok());
    if (counted)
      for (int i = 0; i < 4; ++i) expected[i] += values[i];
  };
  send(cluster->intermediates[0]->port(), "a", 100, true);
  send(cluster->intermediates[0]->port(), "b", 200, true);
  send(cluster->intermediates[1]->port(), "c", 1000, false);  // lost with its aggregator
  send(cluster->root->port(), "d", 5, true);

  cluster->intermediates[1]->Shutdown(absl::ZeroDuration());
  cluster->intermediates[1].reset();

  const v1::AggregationStatus final = SealAndWait(control, "survivor");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  EXPECT_EQ(final.contributions(), 3);
  absl::StatusOr<AggregateResult> result = control.GetResult("survivor");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 3);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(result->fields[0].value.values<int64_t>()[i], expected[i]);
}

}  // namespace
}  // namespace fedagg::testing

namespace fedagg::testing {
namespace {

TEST(TierTest, MaxContributionsReachedThroughAnIntermediateSealsTheRoot) {
  // All of max_contributions counted at one intermediate: its mirror refuses more and
  // pushes them, and the root, which decides, seals and finalizes with no one sealing it.
  auto cluster = Cluster::Start(1);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  v1::AggregationSpec spec = MakeSpec("full", {{"w", "int64[2]", Intrinsic::kFederatedSum}});
  spec.set_max_contributions(2);
  ASSERT_TRUE(control.Create(spec).ok());
  auto stream = ContributeStream::Open(Connect(cluster->intermediates[0]->port()), "a");
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>({1, 2})}, std::nullopt}).ok());
  auto second = ContributeStream::Open(Connect(cluster->intermediates[0]->port()), "b");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE((*second)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>({10, 20})}, std::nullopt}).ok());
  auto third = ContributeStream::Open(Connect(cluster->intermediates[0]->port()), "c");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*third)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>({5, 5})}, std::nullopt}).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<v1::AggregationStatus> status = control.Get("full");
    return status.ok() && status->state() == v1::FINALIZED;
  })) << control.Get("full")->ShortDebugString();
  absl::StatusOr<AggregateResult> result = control.GetResult("full");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 2);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[0], 11);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[1], 22);
}

// The first update an intermediate sees for a new aggregation makes it learn and join the
// aggregation; the update waits for that join instead of being refused. Raw streams:
// nothing retries, so a refusal would show.
TEST(TierTest, FirstUpdateToANewAggregationWaitsForTheJoin) {
  ServerConfig config = LoopbackConfig();
  config.forward_interval = absl::Milliseconds(20);
  auto cluster = Cluster::Start(1, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  for (int round = 0; round < 5; ++round) {
    const std::string id = absl::StrCat("fresh-", round);
    const v1::AggregationSpec spec = MakeSpec(id, {{"w", "float32[2]", Intrinsic::kFederatedSum}}, 1);
    ASSERT_TRUE(control.Create(spec).ok());
    RawContributeStream stream(cluster->intermediates[0]->port(), "client");
    ASSERT_TRUE(stream.open());
    const std::string bytes = BytesOf({1.5f, float(round)});
    ASSERT_TRUE(stream.Write(HeaderRequest(id, 1)));
    ASSERT_TRUE(stream.Write(ChunkRequest(0, 0, bytes)));
    ASSERT_TRUE(stream.Write(EndRequest(bytes)));
    absl::StatusOr<v1::ContributeResponse> answer = stream.Read();
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_TRUE(answer->has_ack()) << answer->DebugString();
    const v1::AggregationStatus final = SealAndWait(control, id);
    ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
    absl::StatusOr<AggregateResult> result = control.GetResult(id);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->contributions, 1);
    EXPECT_EQ(result->fields[0].value.values<float>()[1], float(round));
  }
}

TEST(TierTest, RestartedIntermediateRejoinsAnOpenAggregation) {
  auto cluster = Cluster::Start(1);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("rejoin", {{"w", "int64[2]", Intrinsic::kFederatedSum}}, 2);
  ASSERT_TRUE(control.Create(spec).ok());
  auto send = [&](int port, const std::string& client, int64_t value) {
    auto stream = ContributeStream::Open(Connect(port), client);
    ASSERT_TRUE(stream.ok()) << stream.status();
    const std::vector<int64_t> values = {value, 1};
    ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>(values)}, std::nullopt}).ok());
  };
  send(cluster->intermediates[0]->port(), "before", 10);
  // Wait until the intermediate forwarded its delta (forward interval 100 ms).
  for (int i = 0; i < 100 && Contributions(control, "rejoin") < 1; ++i) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(Contributions(control, "rejoin"), 1);
  cluster->intermediates[0].reset();  // the process dies

  ServerConfig config = LoopbackConfig();
  config.parent_address = absl::StrCat("127.0.0.1:", cluster->root->port());
  config.node_id = "intermediate-0";  // the same name, a new life
  absl::StatusOr<std::unique_ptr<FedaggServer>> restarted = FedaggServer::Start(config);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  send((*restarted)->port(), "after", 5);

  const v1::AggregationStatus final = SealAndWait(control, "rejoin");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("rejoin");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 2);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[0], 15);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[1], 2);
}

}  // namespace
}  // namespace fedagg::testing

namespace fedagg::testing {
namespace {

TEST(TierTest, ThreeLevelTreeDeliversTheGrandchildrensUpdates) {
  auto cluster = Cluster::Start(1);  // root <- mid
  ASSERT_NE(cluster, nullptr);
  FedaggServer& mid = *cluster->intermediates[0];
  ServerConfig leaf_config = LoopbackConfig();
  leaf_config.parent_address = absl::StrCat("127.0.0.1:", mid.port());
  leaf_config.node_id = "leaf";
  leaf_config.forward_interval = absl::Hours(1);  // everything goes up with the final push
  absl::StatusOr<std::unique_ptr<FedaggServer>> leaf = FedaggServer::Start(leaf_config);
  ASSERT_TRUE(leaf.ok()) << leaf.status();

  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("deep", {{"w", "int64[3]", Intrinsic::kFederatedSum}}, 3);
  ASSERT_TRUE(control.Create(spec).ok());
  // The mid tier learns the aggregation by polling the root; wait for it.
  ControlClient mid_control(Connect(mid.port()));
  for (int i = 0; i < 100 && !mid_control.Get("deep").ok(); ++i) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(mid_control.Get("deep").ok());

  auto send = [&](int port, const std::string& client, int64_t value) {
    auto stream = ContributeStream::Open(Connect(port), client);
    ASSERT_TRUE(stream.ok()) << stream.status();
    const std::vector<int64_t> values = {value, value, 1};
    absl::StatusOr<v1::Ack> ack =
        (*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<int64_t>(values)}, std::nullopt});
    ASSERT_TRUE(ack.ok()) << client << ": " << ack.status();
  };
  send((*leaf)->port(), "g1", 1);
  send((*leaf)->port(), "g2", 2);
  send(mid.port(), "m1", 100);

  const v1::AggregationStatus final = SealAndWait(control, "deep");
  ASSERT_EQ(final.state(), v1::FINALIZED) << final.detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("deep");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 3);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[0], 103);
  EXPECT_EQ(result->fields[0].value.values<int64_t>()[2], 3);
}

}  // namespace
}  // namespace fedagg::testing
