// The limits a node enforces on its clients: the memory budget, the ingest window (which
// makes updates wait rather than refusing them), open streams per caller identity, and
// eviction of updates whose client stalled. Each test checks the refusal's
// code and message, that nothing was counted, that other work went on unharmed, and that
// the refused client succeeds once the limit allows it.
#include <algorithm>
#include <thread>

#include "absl/time/clock.h"
#include "fedagg/v1/tier.grpc.pb.h"
#include "service/core/partial_aggregate.h"
#include "tests/integration/raw_streams.h"

namespace fedagg::testing {
namespace {

constexpr int kElements = 1024;  // float32[1024]: 4096 bytes per update
constexpr uint64_t kUpdateBytes = kElements * sizeof(float);

v1::AggregationSpec BudgetSpec() {
  return MakeSpec("mem", {{"w", absl::StrCat("float32[", kElements, "]"), Intrinsic::kFederatedSum}});
}

std::vector<float> Filled(float value) { return std::vector<float>(kElements, value); }

UpdateView DenseUpdate(const std::vector<float>& values) {
  return UpdateView{{FieldValue::Dense<float>(values)}, std::nullopt};
}

// Seals "mem" and checks its result: `contributions` updates, every element `value`.
void ExpectSealedResult(ControlClient& control, int64_t contributions, float value) {
  ASSERT_TRUE(control.Seal("mem").ok());
  absl::StatusOr<AggregateResult> result = control.GetResult("mem");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, contributions);
  for (int i = 0; i < kElements; ++i) ASSERT_EQ(result->fields[0].value.values<float>()[i], value);
}

// The accumulator bytes of an aggregation of `spec`, measured on a node without a budget.
uint64_t AccumulatorBytes(const v1::AggregationSpec& spec = BudgetSpec()) {
  auto cluster = Cluster::Start(0);
  if (cluster == nullptr) return 0;
  ControlClient control(Connect(cluster->root->port()));
  EXPECT_TRUE(control.Create(spec).ok());
  return cluster->root->memory_budget().used();
}

TEST(MemoryBudgetServiceTest, RefusesAnUpdateOverBudgetUntilMemoryIsReleased) {
  const uint64_t accumulator = AccumulatorBytes();
  ASSERT_GT(accumulator, 0u);
  ServerConfig config = LoopbackConfig();
  // Room for the accumulator and two updates in flight, not three.
  config.memory_budget_bytes = accumulator + 2 * kUpdateBytes + kUpdateBytes / 2;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const MemoryBudget& budget = cluster->root->memory_budget();
  const int port = cluster->root->port();
  ControlClient control(Connect(port));
  ASSERT_TRUE(control.Create(BudgetSpec()).ok());
  EXPECT_EQ(budget.used(), accumulator);

  // Two clients start updates and hold them open: their buffers are claimed at the header.
  RawContributeStream first(port, "first"), second(port, "second");
  ASSERT_TRUE(first.open() && second.open());
  ASSERT_TRUE(first.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(second.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(Eventually([&] { return budget.used() == accumulator + 2 * kUpdateBytes; })) << budget.used();

  // A third update does not fit: refused before anything is held.
  auto third = ContributeStream::Open(Connect(port), "third");
  ASSERT_TRUE(third.ok()) << third.status();
  absl::StatusOr<v1::Ack> refused = (*third)->Contribute(BudgetSpec(), DenseUpdate(Filled(3)));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("memory budget reached"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--memory_budget_bytes"), std::string::npos) << refused.status();
  EXPECT_EQ(budget.used(), accumulator + 2 * kUpdateBytes);
  EXPECT_EQ(control.Get("mem")->contributions(), 0);

  // The updates in flight are unharmed: the first completes and is counted.
  const std::string first_bytes = BytesOf(Filled(1));
  ASSERT_TRUE(first.Write(ChunkRequest(0, 0, first_bytes)));
  ASSERT_TRUE(first.Write(EndRequest(first_bytes)));
  absl::StatusOr<v1::ContributeResponse> ack = first.Read();
  ASSERT_TRUE(ack.ok() && ack->has_ack()) << ack.status();
  EXPECT_EQ(ack->ack().contributions(), 1);
  // The second gives up (its update is discarded); once the first's batch is reduced
  // (--flush_interval_ms) only the accumulator is held, and the third client gets in.
  EXPECT_TRUE(second.Close().ok());
  ASSERT_TRUE(Eventually([&] { return budget.used() == accumulator; })) << budget.used();
  absl::StatusOr<v1::Ack> accepted = (*third)->Contribute(BudgetSpec(), DenseUpdate(Filled(3)));
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ(accepted->contributions(), 2);

  ExpectSealedResult(control, 2, 4.0f);
}

TEST(MemoryBudgetServiceTest, AnUpdateLargerThanTheWholeBudgetIsRefusedWithTheBudgetInTheMessage) {
  ServerConfig config = LoopbackConfig();
  config.memory_budget_bytes = kUpdateBytes / 2;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  // A dense float32[1024] sum's accumulators (4096 bytes) do not fit the budget: refused
  // when it is created, before anything is allocated.
  const absl::StatusOr<v1::AggregationStatus> too_large = control.Create(BudgetSpec());
  ASSERT_EQ(too_large.status().code(), absl::StatusCode::kResourceExhausted) << too_large.status();
  EXPECT_NE(too_large.status().message().find("memory budget reached: the accumulators of aggregation 'mem'"),
            std::string::npos)
      << too_large.status();
  EXPECT_EQ(cluster->root->memory_budget().used(), 0u);
  // A sparse_sum_sparse aggregation holds no accumulator until it receives coordinates:
  // it fits, and an update of every coordinate (12 KiB) is larger than the whole budget.
  const v1::AggregationSpec union_spec =
      MakeSpec("mem", {{"w", absl::StrCat("float32[", kElements, "]"), Intrinsic::kSparseSumSparse}});
  ASSERT_TRUE(control.Create(union_spec).ok());
  std::vector<int64_t> indices(kElements);
  for (int i = 0; i < kElements; ++i) indices[i] = i;
  const std::vector<float> values = Filled(1);
  absl::StatusOr<v1::Ack> refused = SubmitUpdate(
      Connect(cluster->root->port()), "big", union_spec,
      UpdateView{{FieldValue::Sparse<float>(indices, values)}, std::nullopt});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find(absl::StrCat("the ", kUpdateBytes / 2, "-byte budget")),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(control.Get("mem")->contributions(), 0);
}

// A push of a child's partial to the root of `cluster` for aggregation `id`, written by
// the test chunk by chunk.
struct PartialPush {
  PartialPush(const Cluster& cluster, const std::string& id, uint64_t total_bytes)
      : tier(v1::Tier::NewStub(Connect(cluster.root->port()))), writer(tier->PushPartial(&context, &response)) {
    header.set_aggregation_id(id);
    header.set_child_id("edge");
    header.set_sequence(1);
    header.set_total_bytes(total_bytes);
  }
  // Writes `data` as the next chunk; false once the parent has ended the call.
  bool Write(std::string data) {
    v1::PartialChunk chunk = header;
    chunk.set_data(std::move(data));
    return writer->Write(chunk);
  }
  grpc::Status Finish() {
    writer->WritesDone();
    return writer->Finish();
  }

  std::unique_ptr<v1::Tier::Stub> tier;
  grpc::ClientContext context;
  v1::PushPartialResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PartialChunk>> writer;
  v1::PartialChunk header;
};

// A child aggregator's partial counts in the parent's budget from its first chunk (it is
// held decoded, with the chunks in flight): one that cannot fit is refused before a byte
// of it is held, with the budget in the message; the child keeps it and pushes it again.
TEST(MemoryBudgetServiceTest, APartialFromAChildThatDoesNotFitIsRefusedBeforeItIsHeld) {
  ServerConfig config = LoopbackConfig();
  config.memory_budget_bytes = 64 << 10;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  ASSERT_TRUE(control.Create(Int64SumSpec("mem")).ok());
  const MemoryBudget& budget = cluster->root->memory_budget();
  const uint64_t held_before = budget.used();
  PartialPush push(*cluster, "mem", 40 << 10);  // decoded plus as many bytes in flight: 80 KiB of 64
  push.Write(std::string(1024, 'x'));
  const grpc::Status refused = push.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("a partial of 40960 bytes from child 'edge'"), std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("the 65536-byte budget (--memory_budget_bytes)"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(budget.used(), held_before);
}

// A large partial is decoded while it arrives: the parent claims its decoded size plus
// the bounded chunks in flight (not twice its size), and merges it.
TEST(MemoryBudgetServiceTest, ALargePartialIsHeldOnceDecodedNotAlsoAsReceived) {
  const v1::AggregationSpec spec = MakeSpec("big", {{"w", "int32[10000000]", Intrinsic::kFederatedSum}});
  PartialAggregate partial(ReductionOf(spec));
  std::vector<int32_t> ones(10000000, 1);
  ASSERT_TRUE(partial.AccumulateBatch({UpdateView{{FieldValue::Dense<int32_t>(ones)}, std::nullopt}}).ok());
  absl::StatusOr<std::string> bytes = partial.Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const uint64_t accumulator = AccumulatorBytes(spec);
  ServerConfig config = LoopbackConfig();
  // Room for the accumulator, the decoded partial and 20 MiB of chunks; not for the
  // partial held twice (bytes->size() is about 80 MB: int32 sums accumulate as int64).
  config.memory_budget_bytes = accumulator + bytes->size() + (20 << 20);
  ASSERT_LT(config.memory_budget_bytes, accumulator + 2 * bytes->size());
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  ASSERT_TRUE(control.Create(spec).ok());
  PartialPush push(*cluster, "big", bytes->size());
  for (size_t offset = 0; offset < bytes->size(); offset += 1 << 20) {
    ASSERT_TRUE(push.Write(bytes->substr(offset, 1 << 20))) << "at byte " << offset;
  }
  const grpc::Status merged = push.Finish();
  ASSERT_TRUE(merged.ok()) << merged.error_message();
  EXPECT_EQ(push.response.contributions(), 1);
  EXPECT_EQ(cluster->root->memory_budget().used(), accumulator);
  ASSERT_TRUE(control.Seal("big").ok());
  absl::StatusOr<AggregateResult> result = control.GetResult("big");
  ASSERT_TRUE(result.ok()) << result.status();
  const auto sums = result->fields[0].value.values<int64_t>();
  ASSERT_EQ(sums.size(), ones.size());
  EXPECT_EQ(std::count(sums.begin(), sums.end(), 1), static_cast<ptrdiff_t>(ones.size()));
}

// A malformed partial is refused as soon as its first bytes are decoded: the parent
// stops reading, so the child learns it long before it has sent the rest.
TEST(MemoryBudgetServiceTest, AMalformedPartialIsRefusedBeforeTheRestIsSent) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  ControlClient control(Connect(cluster->root->port()));
  ASSERT_TRUE(control.Create(Int64SumSpec("mem")).ok());
  constexpr int kChunks = 256;
  PartialPush push(*cluster, "mem", uint64_t{kChunks} << 20);
  int written = 0;
  while (written < kChunks && push.Write(std::string(1 << 20, 'x'))) ++written;
  const grpc::Status refused = push.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::DATA_LOSS) << refused.error_message();
  EXPECT_NE(refused.error_message().find("partial from child 'edge': not a fedagg partial aggregate"),
            std::string::npos)
      << refused.error_message();
  EXPECT_LT(written, kChunks);
  EXPECT_EQ(control.Get("mem")->contributions(), 0);
}

// The child's side: a delta its parent has not taken (here: refused, the parent's budget
// being full) stays with the child, counted in the child's budget until the parent
// holds it; the parent holds nothing of it.
TEST(MemoryBudgetServiceTest, AChildCountsTheDeltaItKeepsForItsParent) {
  const v1::AggregationSpec spec = Int64SumSpec("kept");
  PartialAggregate one_update(ReductionOf(spec));
  ASSERT_TRUE(one_update.AccumulateBatch({Int64Update({1, 2})}).ok());
  absl::StatusOr<std::string> delta = one_update.Serialize();
  ASSERT_TRUE(delta.ok()) << delta.status();
  const uint64_t delta_bytes = delta->size();
  const uint64_t accumulator = AccumulatorBytes(spec);
  ASSERT_GT(accumulator, 0u);
  ServerConfig config = LoopbackConfig();
  // Room for the accumulator and an update of 16 bytes, not for a partial held decoded
  // plus its chunks in flight (for one this small, twice its size).
  config.memory_budget_bytes = accumulator + 2 * delta_bytes - 1;
  ASSERT_GE(2 * delta_bytes - 1, 16u);
  auto cluster = Cluster::Start(1, config);
  ASSERT_NE(cluster, nullptr);
  FedaggServer& child = *cluster->intermediates[0];
  ControlClient control(Connect(cluster->root->port()));
  ASSERT_TRUE(control.Create(spec).ok());
  ControlClient mirror(Connect(child.port()));
  ASSERT_TRUE(Eventually([&] { return mirror.Get("kept").ok(); }));
  absl::StatusOr<v1::Ack> ack = SubmitUpdate(Connect(child.port()), "client", spec, Int64Update({1, 2}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  // Each forward interval the push is refused; the delta is kept, and counted.
  EXPECT_TRUE(Eventually([&] { return child.memory_budget().used() == accumulator + delta_bytes; }))
      << child.memory_budget().used() << " held, " << accumulator << " + " << delta_bytes << " expected";
  EXPECT_EQ(cluster->root->memory_budget().used(), accumulator);
  EXPECT_EQ(control.Get("kept")->contributions(), 0);
}

// Sends one update of BudgetSpec on its own stream from another thread (it may wait for
// its place in the ingest window); Join returns the ack.
class BackgroundContribution {
 public:
  BackgroundContribution(int port, const std::string& client_id, float value)
      : thread_([this, port, client_id, value] {
          auto stream = ContributeStream::Open(Connect(port), client_id);
          ack_ = stream.ok() ? (*stream)->Contribute(BudgetSpec(), DenseUpdate(Filled(value)))
                             : absl::StatusOr<v1::Ack>(stream.status());
        }) {}
  absl::StatusOr<v1::Ack> Join() {
    thread_.join();
    return ack_;
  }

 private:
  absl::StatusOr<v1::Ack> ack_ = absl::UnknownError("not sent");
  std::thread thread_;
};

// With a window of two updates and batches of one (half the window), a third update waits
// — nothing of it is allocated, nothing refused — until the first is counted and reduced.
TEST(IngestWindowServiceTest, AnUpdateWaitsForItsPlaceAndIsCountedOnceOneIsFree) {
  ServerConfig config = LoopbackConfig();
  config.ingest_window_bytes = 2 * kUpdateBytes;
  config.flush_interval = absl::Hours(1);  // only the window's own rules free bytes here
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const IngestWindow& window = *cluster->root->ingest_window();
  const int port = cluster->root->port();
  ControlClient control(Connect(port));
  ASSERT_TRUE(control.Create(BudgetSpec()).ok());
  const uint64_t accumulator = cluster->root->memory_budget().used();

  RawContributeStream first(port, "first"), second(port, "second");
  ASSERT_TRUE(first.open() && second.open());
  ASSERT_TRUE(first.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(second.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(Eventually([&] { return window.used() == 2 * kUpdateBytes; })) << window.used();

  BackgroundContribution third(port, "third", 3);
  ASSERT_TRUE(Eventually([&] { return window.waiting() == 1; }));
  EXPECT_EQ(cluster->root->memory_budget().used(), accumulator + 2 * kUpdateBytes);  // third: nothing held

  const std::string first_bytes = BytesOf(Filled(1));
  ASSERT_TRUE(first.Write(ChunkRequest(0, 0, first_bytes)));
  ASSERT_TRUE(first.Write(EndRequest(first_bytes)));
  absl::StatusOr<v1::ContributeResponse> ack = first.Read();
  ASSERT_TRUE(ack.ok() && ack->has_ack()) << ack.status();
  // The first was reduced as it arrived (a batch of one), which let the third in.
  absl::StatusOr<v1::Ack> third_ack = third.Join();
  ASSERT_TRUE(third_ack.ok()) << third_ack.status();
  EXPECT_EQ(third_ack->contributions(), 2);
  EXPECT_TRUE(second.Close().ok());
  ASSERT_TRUE(Eventually([&] { return window.used() == 0; })) << window.used();
  EXPECT_EQ(window.waits(), 1);

  ExpectSealedResult(control, 2, 4.0f);
}

// A pending batch holds bytes of the window too: when an update has to wait, pending
// batches are reduced at once instead of at their flush interval.
TEST(IngestWindowServiceTest, AWaitingUpdateHasPendingBatchesReducedAtOnce) {
  ServerConfig config = LoopbackConfig();
  config.ingest_window_bytes = 3 * kUpdateBytes;  // batches close at 1.5 updates: one waits
  config.flush_interval = absl::Hours(1);
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const IngestWindow& window = *cluster->root->ingest_window();
  const int port = cluster->root->port();
  ControlClient control(Connect(port));
  ASSERT_TRUE(control.Create(BudgetSpec()).ok());
  absl::StatusOr<std::shared_ptr<Aggregation>> aggregation = cluster->root->registry().Find("mem");
  ASSERT_TRUE(aggregation.ok());

  auto pending = ContributeStream::Open(Connect(port), "pending");
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_TRUE((*pending)->Contribute(BudgetSpec(), DenseUpdate(Filled(1))).ok());
  EXPECT_EQ((*aggregation)->pending_updates(), 1);
  RawContributeStream open_b(port, "b"), open_c(port, "c");
  ASSERT_TRUE(open_b.open() && open_c.open());
  ASSERT_TRUE(open_b.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(open_c.Write(HeaderRequest("mem", 1)));
  ASSERT_TRUE(Eventually([&] { return window.used() == 3 * kUpdateBytes; })) << window.used();

  BackgroundContribution waiting(port, "d", 5);
  absl::StatusOr<v1::Ack> ack = waiting.Join();
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 2);
  EXPECT_EQ(window.waits(), 1);
  EXPECT_TRUE(open_b.Close().ok());
  EXPECT_TRUE(open_c.Close().ok());
  ExpectSealedResult(control, 2, 6.0f);
}

TEST(StreamLimitTest, StreamsOverTheLimitOfOnePeerAreRefusedOthersContinue) {
  ServerConfig config = LoopbackConfig();
  config.max_streams_per_identity = 2;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int port = cluster->root->port();
  ControlClient control(Connect(port));
  const v1::AggregationSpec spec = MakeSpec("s", {{"w", "float32[2]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(spec).ok());
  const std::vector<float> values = {1, 2};
  const UpdateView update{{FieldValue::Dense<float>(values)}, std::nullopt};

  auto a = ContributeStream::Open(Connect(port), "a");
  auto b = ContributeStream::Open(Connect(port), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  // Every stream here comes from 127.0.0.1: one identity when no tokens are configured.
  auto c = ContributeStream::Open(Connect(port), "c");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted) << c.status();
  EXPECT_NE(c.status().message().find("peer ipv4:127.0.0.1 already has 2 update streams open"), std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("--max_streams_per_identity=2"), std::string::npos) << c.status();
  // Submit streams count too.
  absl::StatusOr<v1::Ack> submitted = SubmitUpdate(Connect(port), "d", spec, update);
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kResourceExhausted) << submitted.status();
  EXPECT_EQ(control.Get("s")->contributions(), 0);

  // The open streams go on.
  ASSERT_TRUE((*a)->Contribute(spec, update).ok());
  // Once one closes, a new stream is let in.
  EXPECT_TRUE((*b)->Close().ok());
  absl::StatusOr<std::unique_ptr<ContributeStream>> later;
  ASSERT_TRUE(Eventually([&] {
    later = ContributeStream::Open(Connect(port), "c");
    return later.ok();
  })) << later.status();
  absl::StatusOr<v1::Ack> ack = (*later)->Contribute(spec, update);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 2);
}

TEST(StreamLimitTest, TheIdentityIsTheBearerTokenWhenTokensAreConfigured) {
  ServerConfig config = LoopbackConfig();
  config.auth_tokens = {"token-one", "token-two"};
  config.max_streams_per_identity = 1;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int port = cluster->root->port();
  auto one = ContributeStream::Open(Connect(port), "a", CallOptions{"token-one"});
  ASSERT_TRUE(one.ok()) << one.status();
  auto again = ContributeStream::Open(Connect(port), "b", CallOptions{"token-one"});
  ASSERT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted) << again.status();
  EXPECT_NE(again.status().message().find("bearer token #1 already has 1 update streams open"), std::string::npos)
      << again.status();
  EXPECT_EQ(again.status().message().find("token-one"), std::string::npos) << "the token leaked";
  // Another principal from the same address is not affected.
  auto two = ContributeStream::Open(Connect(port), "b", CallOptions{"token-two"});
  EXPECT_TRUE(two.ok()) << two.status();
  // A wrong token is still UNAUTHENTICATED, not a stream-limit refusal.
  auto wrong = ContributeStream::Open(Connect(port), "c", CallOptions{"guess"});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
}

class StallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config = LoopbackConfig();
    config.stall_timeout = absl::Milliseconds(300);
    cluster_ = Cluster::Start(0, config);
    ASSERT_NE(cluster_, nullptr);
    control_ = std::make_unique<ControlClient>(Connect(cluster_->root->port()));
    ASSERT_TRUE(control_->Create(spec_).ok());
    accumulator_bytes_ = cluster_->root->memory_budget().used();
  }

  const v1::AggregationSpec spec_ = MakeSpec("stall", {{"w", "float32[4]", Intrinsic::kFederatedSum}});
  const std::vector<float> values_ = {1, 2, 3, 4};
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ControlClient> control_;
  uint64_t accumulator_bytes_ = 0;
};

TEST_F(StallTest, AContributeUpdateStalledMidwayIsDiscardedAndTheClientMayRetry) {
  const int port = cluster_->root->port();
  auto stalling = ContributeStream::Open(Connect(port), "slow");
  ASSERT_TRUE(stalling.ok());
  // Half of the update's bytes, then nothing.
  absl::StatusOr<v1::Ack> answer = (*stalling)->SendRaw(
      {HeaderRequest("stall", 1), ChunkRequest(0, 0, BytesOf({1, 2}))});
  ASSERT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded) << answer.status();
  EXPECT_NE(answer.status().message().find("received no message for 300ms (the server's --stall_timeout)"),
            std::string::npos)
      << answer.status();
  EXPECT_NE(answer.status().message().find("nothing of it was counted and the client id is free"),
            std::string::npos);
  EXPECT_EQ(control_->Get("stall")->contributions(), 0);
  EXPECT_EQ(cluster_->root->memory_budget().used(), accumulator_bytes_);  // the update's buffer is gone

  // The same client id is free: the update goes through on a new stream.
  auto retry = ContributeStream::Open(Connect(port), "slow");
  ASSERT_TRUE(retry.ok());
  absl::StatusOr<v1::Ack> ack = (*retry)->Contribute(spec_, UpdateView{{FieldValue::Dense<float>(values_)}, std::nullopt});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);
  ASSERT_TRUE(control_->Seal("stall").ok());
  absl::StatusOr<AggregateResult> result = control_->GetResult("stall");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 1);
  EXPECT_EQ(result->fields[0].value.values<float>()[3], 4.0f);
}

TEST_F(StallTest, ASubmitStalledAfterItsHeaderIsDiscarded) {
  auto stub = v1::Aggregation::NewStub(Connect(cluster_->root->port()));
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub->Submit(&context, &response);
  v1::SubmitRequest header;
  header.mutable_header()->set_aggregation_id("stall");
  header.mutable_header()->set_client_id("slow-submit");
  header.mutable_header()->add_fields();
  ASSERT_TRUE(writer->Write(header));
  const absl::Status status = FromGrpcStatus(writer->Finish());
  ASSERT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("--stall_timeout"), std::string::npos) << status;
  EXPECT_EQ(control_->Get("stall")->contributions(), 0);
  absl::StatusOr<v1::Ack> ack = SubmitUpdate(Connect(cluster_->root->port()), "slow-submit", spec_,
                                             UpdateView{{FieldValue::Dense<float>(values_)}, std::nullopt});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);
}

TEST_F(StallTest, AStreamIdleBetweenUpdatesIsNotEvicted) {
  auto stream = ContributeStream::Open(Connect(cluster_->root->port()), "idle");
  ASSERT_TRUE(stream.ok());
  const v1::AggregationSpec second = MakeSpec("stall-2", {{"w", "float32[4]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control_->Create(second).ok());
  const UpdateView update{{FieldValue::Dense<float>(values_)}, std::nullopt};
  ASSERT_TRUE((*stream)->Contribute(spec_, update).ok());
  absl::SleepFor(absl::Milliseconds(900));  // three stall timeouts with no update open
  absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(second, update);
  EXPECT_TRUE(ack.ok()) << ack.status();
}

}  // namespace
}  // namespace fedagg::testing
