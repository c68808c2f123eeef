// Integration tests of ContributeStream's reconnection: a stream that breaks before an
// update's answer is reopened and the update sent again with the same client id, which the
// server counts once — after a server restart on the same port, after a lost ack, and
// the status once every attempt has failed.
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "tests/integration/tcp_relay.h"
#include "tests/integration/test_cluster.h"
#include "tests/temp_dir.h"

namespace fedagg::testing {
namespace {

using ::testing::HasSubstr;

int64_t ContributionsAt(int port, const std::string& aggregation_id) {
  absl::StatusOr<v1::AggregationStatus> status = ControlClient(Connect(port)).Get(aggregation_id);
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? status->contributions() : -1;
}

TEST(ReconnectTest, StreamReconnectsToServerRestartedOnSamePort) {
  TempDir dir;
  ServerConfig config = LoopbackConfig();
  config.checkpoint_dir = dir.path();
  absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ControlClient control(Connect(port));
  const v1::AggregationSpec first = Int64SumSpec("restart-1"), second = Int64SumSpec("restart-2");
  ASSERT_TRUE(control.Create(first).ok());
  ASSERT_TRUE(control.Create(second).ok());

  absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(Connect(port), "alice");
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(first, Int64Update({1, 10}));
  ASSERT_TRUE(ack.ok()) << ack.status();

  (*server)->Shutdown(absl::Milliseconds(100));  // checkpoints both aggregations, breaks the stream
  server->reset();
  config.listen_address = absl::StrCat("127.0.0.1:", port);
  server = FedaggServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->restored_aggregations(), 2);

  // The old stream object reopens its stream to the new server and sends the update there.
  ack = (*stream)->Contribute(second, Int64Update({2, 20}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);
  // The reopened stream is an ordinary one: alice's first update is still counted once.
  ack = (*stream)->Contribute(first, Int64Update({1, 10}));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kAlreadyExists) << ack.status();
  EXPECT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(ContributionsAt(port, first.aggregation_id()), 1);
  EXPECT_EQ(ContributionsAt(port, second.aggregation_id()), 1);

  ControlClient restarted(Connect(port));
  ASSERT_TRUE(restarted.Seal(second.aggregation_id()).ok());
  ASSERT_TRUE(restarted.WatchUntilFinal(second.aggregation_id()).ok());
  absl::StatusOr<AggregateResult> result = restarted.GetResult(second.aggregation_id());
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> sum(2);
  std::memcpy(sum.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(sum, (std::vector<int64_t>{2, 20}));
}

TEST(ReconnectTest, ResendAfterLostAckIsCountedOnce) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(/*intermediates=*/0);
  ASSERT_NE(cluster, nullptr);
  const int port = cluster->root->port();
  const v1::AggregationSpec spec = Int64SumSpec("lost-ack");
  ASSERT_TRUE(ControlClient(Connect(port)).Create(spec).ok());
  TcpRelay relay(port);
  ASSERT_NE(relay.port(), 0);

  absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(Connect(relay.port()), "bob");
  ASSERT_TRUE(stream.ok()) << stream.status();
  relay.set_drop_server_bytes(true);  // the server's ack never reaches the client
  absl::StatusOr<v1::Ack> ack;
  std::thread contributor([&] { ack = (*stream)->Contribute(spec, Int64Update({3, 30})); });
  // Wait until the server has counted the update, then break the connection.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (ContributionsAt(port, spec.aggregation_id()) < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  relay.set_drop_server_bytes(false);
  relay.CutConnections();
  contributor.join();

  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->aggregation_id(), spec.aggregation_id());
  EXPECT_EQ(ack->contributions(), 0);  // answered ALREADY_EXISTS: counted by the first send
  EXPECT_EQ(ack->level(), v1::RECEIVED);
  EXPECT_EQ(ContributionsAt(port, spec.aggregation_id()), 1);
  EXPECT_TRUE((*stream)->Close().ok());
}

TEST(ReconnectTest, GivesUpAfterMaxAttemptsNamingThemAndTheLastError) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(/*intermediates=*/0);
  ASSERT_NE(cluster, nullptr);
  const v1::AggregationSpec spec = Int64SumSpec("gone");
  ASSERT_TRUE(ControlClient(Connect(cluster->root->port())).Create(spec).ok());
  CallOptions options;
  options.max_attempts = 3;
  options.initial_backoff = absl::Milliseconds(5);
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream =
      ContributeStream::Open(Connect(cluster->root->port()), "carol", options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  cluster->root->Shutdown(absl::Milliseconds(100));
  cluster->root.reset();  // nothing listens on the port any more

  absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(spec, Int64Update({4, 40}));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kUnavailable) << ack.status();
  EXPECT_THAT(ack.status().message(),
              HasSubstr("the update to aggregation 'gone' was not acknowledged after 3 attempts; the last error: "));
}

TEST(ReconnectTest, FinalRefusalsAreReturnedAtOnce) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(/*intermediates=*/0);
  ASSERT_NE(cluster, nullptr);
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream =
      ContributeStream::Open(Connect(cluster->root->port()), "dave");
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<v1::Ack> ack = (*stream)->ContributeUnchecked("no-such-aggregation", Int64Update({1, 1}));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kNotFound) << ack.status();
  EXPECT_EQ(ack.status().message(),
            "no aggregation 'no-such-aggregation' on this server (never created here, or finished and forgotten: "
            "--retain_finished and --retain_finished_mib say how many results it keeps)");
}

}  // namespace
}  // namespace fedagg::testing
