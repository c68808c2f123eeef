// Integration tests of ack levels: the C++ client asks for RECEIVED or DURABLE acks from
// in-process servers with and without --checkpoint_dir, on both update paths; an
// intermediate aggregator acks DURABLE once its root's checkpoint holds the update, and
// refuses DURABLE under a root without checkpoints. A server restarted on the same
// checkpoint directory resumes the aggregation (crash tests with kill -9 are in tests/e2e).

#include <filesystem>

#include "service/rounds/checkpoint_file.h"
#include "tests/integration/test_cluster.h"
#include "tests/temp_dir.h"

namespace fedagg::testing {
namespace {

ServerConfig CheckpointingConfig(const std::string& dir) {
  ServerConfig config = LoopbackConfig();
  config.checkpoint_dir = dir;
  config.checkpoint_interval = absl::Milliseconds(50);
  return config;
}

TEST(DurableAckTest, DurableAcksOnBothPathsAndResumeAfterRestart) {
  TempDir dir;
  const v1::AggregationSpec spec = Int64SumSpec("durable-1");
  const std::vector<int64_t> a = {1, 10}, b = {1, 200}, c = {1, 3000};
  {
    absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(CheckpointingConfig(dir.path()));
    ASSERT_TRUE(server.ok()) << server.status();
    auto channel = Connect((*server)->port());
    ASSERT_TRUE(ControlClient(channel).Create(spec).ok());
    CallOptions durable;
    durable.ack_level = v1::DURABLE;
    absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(channel, "alice", durable);
    ASSERT_TRUE(stream.ok()) << stream.status();
    absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(spec, Int64Update(a));
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->level(), v1::DURABLE);
    EXPECT_TRUE((*stream)->Close().ok());
    ack = SubmitUpdate(channel, "bob", spec, Int64Update(b), durable);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->level(), v1::DURABLE);
    ack = SubmitUpdate(channel, "carol", spec, Int64Update(c));  // RECEIVED by default
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->level(), v1::RECEIVED);
    (*server)->Shutdown();  // an orderly shutdown checkpoints carol's update too
  }
  absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(CheckpointingConfig(dir.path()));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->restored_aggregations(), 1);
  auto channel = Connect((*server)->port());
  for (const auto& [client, values] : {std::pair{"alice", a}, std::pair{"bob", b}, std::pair{"carol", c}}) {
    absl::StatusOr<v1::Ack> again = SubmitUpdate(channel, client, spec, Int64Update(values));
    EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << client << ": " << again.status();
  }
  ControlClient control(channel);
  ASSERT_TRUE(control.Seal(spec.aggregation_id()).ok());
  absl::StatusOr<v1::AggregationStatus> final_status = control.WatchUntilFinal(spec.aggregation_id());
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  EXPECT_EQ(final_status->state(), v1::FINALIZED);
  absl::StatusOr<AggregateResult> result = control.GetResult(spec.aggregation_id());
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> w(2);
  std::memcpy(w.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(w, (std::vector<int64_t>{3, 3210}));
}

TEST(DurableAckTest, DurableIsRefusedWithoutCheckpoints) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(/*intermediates=*/1);
  ASSERT_NE(cluster, nullptr);
  const v1::AggregationSpec spec = Int64SumSpec("durable-2");
  ASSERT_TRUE(ControlClient(Connect(cluster->root->port())).Create(spec).ok());
  CallOptions durable;
  durable.ack_level = v1::DURABLE;
  absl::StatusOr<v1::Ack> ack = SubmitUpdate(Connect(cluster->root->port()), "dana", spec, Int64Update({1, 1}), durable);
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kFailedPrecondition) << ack.status();
  EXPECT_NE(ack.status().message().find("runs without checkpoints"), absl::string_view::npos) << ack.status();
  // Nothing was counted: the same client id is accepted once it asks for RECEIVED.
  ack = SubmitUpdate(Connect(cluster->root->port()), "dana", spec, Int64Update({1, 1}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);

  // Nor does anything above an intermediate aggregator under that root.
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream =
      ContributeStream::Open(Connect(cluster->intermediates[0]->port()), "erin", durable);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ack = (*stream)->Contribute(spec, Int64Update({1, 1}));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kFailedPrecondition) << ack.status();
  EXPECT_NE(ack.status().message().find("no checkpoint holds what this intermediate aggregator forwards"),
            absl::string_view::npos)
      << ack.status();
}

// DURABLE through an intermediate: the ack comes once the root's checkpoint holds a
// partial carrying the update, so a root restarted from its directory holds it even though
// the intermediate (which would push it again) is gone.
TEST(DurableAckTest, AnIntermediateAcksDurableOnceTheRootsCheckpointHoldsTheUpdate) {
  TempDir dir;
  const v1::AggregationSpec spec = Int64SumSpec("durable-tree");
  ServerConfig root_config = CheckpointingConfig(dir.path());
  root_config.checkpoint_interval = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<FedaggServer>> root = FedaggServer::Start(root_config);
  ASSERT_TRUE(root.ok()) << root.status();
  ServerConfig child_config = LoopbackConfig();
  child_config.parent_address = absl::StrCat("127.0.0.1:", (*root)->port());
  child_config.node_id = "durable-edge";
  child_config.forward_interval = absl::Seconds(30);  // only waiting acks make it push
  absl::StatusOr<std::unique_ptr<FedaggServer>> intermediate = FedaggServer::Start(child_config);
  ASSERT_TRUE(intermediate.ok()) << intermediate.status();
  ASSERT_TRUE(ControlClient(Connect((*root)->port())).Create(spec).ok());

  CallOptions durable;
  durable.ack_level = v1::DURABLE;
  auto edge = Connect((*intermediate)->port());
  absl::StatusOr<v1::Ack> ack = SubmitUpdate(edge, "alice", spec, Int64Update({1, 10}), durable);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->level(), v1::DURABLE);
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(edge, "bob", durable);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ack = (*stream)->Contribute(spec, Int64Update({1, 200}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->level(), v1::DURABLE);
  EXPECT_TRUE((*stream)->Close().ok());
  // What the root's disk holds right after the acks: a crash now restarts from it.
  std::filesystem::copy(dir.path() + "/" + CheckpointFileName(spec.aggregation_id()),
                        dir.path() + "/snapshot.ckpt.copy");
  ack = SubmitUpdate(edge, "carol", spec, Int64Update({1, 3000}));  // RECEIVED: not in that copy
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->level(), v1::RECEIVED);

  // Nothing the intermediate holds or could push again reaches the restarted root.
  intermediate->reset();
  root->reset();
  std::filesystem::rename(dir.path() + "/snapshot.ckpt.copy",
                          dir.path() + "/" + CheckpointFileName(spec.aggregation_id()));
  ServerConfig restarted_config = root_config;
  restarted_config.child_grace = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<FedaggServer>> restarted = FedaggServer::Start(restarted_config);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto channel = Connect((*restarted)->port());
  for (const char* client : {"alice", "bob"}) {
    absl::StatusOr<v1::Ack> again = SubmitUpdate(channel, client, spec, Int64Update({1, 1}));
    EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << client << ": " << again.status();
  }
  ControlClient control(channel);
  ASSERT_TRUE(control.Seal(spec.aggregation_id()).ok());
  absl::StatusOr<v1::AggregationStatus> final_status = control.WatchUntilFinal(spec.aggregation_id());
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  ASSERT_EQ(final_status->state(), v1::FINALIZED) << final_status->detail();
  absl::StatusOr<AggregateResult> result = control.GetResult(spec.aggregation_id());
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> w(2);
  std::memcpy(w.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(w, (std::vector<int64_t>{2, 210}));  // both DURABLE-acked updates, each once
}

// Two levels of intermediates: the lower one's ack waits for its parent's answer, which
// waits for the parent's own push to be held by the root's checkpoint.
TEST(DurableAckTest, ADurableAckTravelsThroughTwoLevelsOfIntermediates) {
  TempDir dir;
  const v1::AggregationSpec spec = Int64SumSpec("durable-deep");
  absl::StatusOr<std::unique_ptr<FedaggServer>> root = FedaggServer::Start(CheckpointingConfig(dir.path()));
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::unique_ptr<FedaggServer>> tiers;
  int parent_port = (*root)->port();
  for (const char* name : {"upper", "lower"}) {
    ServerConfig config = LoopbackConfig();
    config.parent_address = absl::StrCat("127.0.0.1:", parent_port);
    config.node_id = name;
    config.forward_interval = absl::Seconds(30);  // only waiting acks make them push
    absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    parent_port = (*server)->port();
    tiers.push_back(*std::move(server));
  }
  ASSERT_TRUE(ControlClient(Connect((*root)->port())).Create(spec).ok());
  CallOptions durable;
  durable.ack_level = v1::DURABLE;
  absl::StatusOr<v1::Ack> ack;
  // The lower tier learns the aggregation from the upper one, which learns it from the root.
  ASSERT_TRUE(Eventually([&] {
    ack = SubmitUpdate(Connect(tiers[1]->port()), "deep", spec, Int64Update({1, 7}), durable);
    return ack.ok() || ack.status().code() != absl::StatusCode::kNotFound;
  }));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->level(), v1::DURABLE);
  // The root's checkpoint on disk holds it now.
  absl::StatusOr<AggregationCheckpoint> checkpoint =
      ReadCheckpointFile(dir.path() + "/" + CheckpointFileName(spec.aggregation_id()));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->contributions, 1);
}

TEST(DurableAckTest, IntermediateWithCheckpointDirIsRefusedAtStart) {
  TempDir dir;
  ServerConfig config = CheckpointingConfig(dir.path());
  config.parent_address = "127.0.0.1:1";
  absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(config);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
}

}  // namespace
}  // namespace fedagg::testing
