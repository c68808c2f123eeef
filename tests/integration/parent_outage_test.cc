// An intermediate aggregator whose parent stops answering while their connection stays
// open, as with a frozen process or a network that drops packets: a TCP relay between
// them stops passing the parent's bytes. The intermediate acknowledges updates at first
// and holds them; its keepalive ping goes unanswered, its Join stream ends, and it refuses
// updates with UNAVAILABLE saying how the link ended. Once the parent's bytes pass again
// it rejoins and delivers what it acknowledged: the result counts each acked update once.
#include <cstring>

#include "gmock/gmock.h"
#include "tests/integration/tcp_relay.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(ParentOutageTest, TheIntermediateRefusesWithTheReasonThenRejoinsAndLosesNothing) {
  // An outage shorter than the root's grace for a lost child: after it, the root would give
  // the intermediate up and release what it acked (AggregationLeasesTest covers that).
  ServerConfig root_config = LoopbackConfig();
  root_config.child_grace = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<FedaggServer>> root = FedaggServer::Start(root_config);
  ASSERT_TRUE(root.ok()) << root.status();
  TcpRelay relay((*root)->port());
  ASSERT_NE(relay.port(), 0);
  ServerConfig child = LoopbackConfig();
  child.parent_address = absl::StrCat("127.0.0.1:", relay.port());
  child.node_id = "edge";
  child.parent_keepalive = FedaggServer::kMinKeepalive;
  absl::StatusOr<std::unique_ptr<FedaggServer>> intermediate = FedaggServer::Start(child);
  ASSERT_TRUE(intermediate.ok()) << intermediate.status();
  const int port = (*intermediate)->port();

  ControlClient control(Connect((*root)->port()));
  const v1::AggregationSpec spec = Int64SumSpec("outage");
  ASSERT_TRUE(control.Create(spec).ok());
  ControlClient mirror(Connect(port));
  ASSERT_TRUE(Eventually([&] { return mirror.Get("outage").ok(); }));

  // Client n sends [1, 1000 + n] to the intermediate; what is acked goes into `expected`.
  std::vector<int64_t> expected = {0, 0};
  int clients = 0;
  auto send = [&](const CallOptions& options) -> absl::Status {
    ++clients;
    const std::vector<int64_t> values = {1, 1000 + clients};
    absl::StatusOr<std::unique_ptr<ContributeStream>> stream =
        ContributeStream::Open(Connect(port), absl::StrCat("client-", clients), options);
    if (!stream.ok()) return stream.status();
    absl::StatusOr<v1::Ack> ack = (*stream)->Contribute(spec, Int64Update(values));
    if (ack.ok()) {
      expected[0] += values[0];
      expected[1] += values[1];
    }
    return ack.status();
  };
  CallOptions once;
  once.max_attempts = 1;
  ASSERT_TRUE(send(CallOptions{}).ok());  // retried until the mirror is joined

  relay.set_drop_server_bytes(true);  // the parent's answers, keepalive acks included, are lost
  absl::Status refused;
  ASSERT_TRUE(Eventually([&] { return !(refused = send(once)).ok(); }, absl::Seconds(30)));
  // Refused either at the header (the node saw its link end: not joined) or at the end
  // (the claim at the parent, which every update needs before it is counted, failed).
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(std::string(refused.message()),
              AnyOf(HasSubstr("is not joined to aggregation 'outage' at its parent: the link to the parent "
                              "aggregator ended with "),
                    HasSubstr("could not claim the client id at the parent aggregator (")));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("retry shortly, or send the update to another aggregator"));
  EXPECT_GE(expected[0], 1);

  relay.set_drop_server_bytes(false);
  ASSERT_TRUE(Eventually([&] { return send(once).ok(); }, absl::Seconds(60)));  // rejoined
  ASSERT_TRUE(control.Seal("outage").ok());
  absl::StatusOr<v1::AggregationStatus> final = control.WatchUntilFinal("outage");
  ASSERT_TRUE(final.ok()) << final.status();
  ASSERT_EQ(final->state(), v1::FINALIZED) << final->detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("outage");
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> sum(2);
  std::memcpy(sum.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(sum, expected);  // every acked update once, those held during the outage included
  EXPECT_EQ(result->contributions, expected[0]);
}


// A claim the root granted but whose answer never reached the intermediate (the root's
// bytes are lost, the intermediate's still arrive): the intermediate refuses the update
// with UNAVAILABLE and gives the claim back, so the client's retry through another
// intermediate is counted — once — instead of being refused ALREADY_EXISTS for an update
// nobody counted (docs/PROTOCOL.md 6.4).
TEST(ParentOutageTest, AClaimWhoseAnswerWasLostIsReleased) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(/*intermediates=*/1);  // B, direct
  ASSERT_NE(cluster, nullptr);
  TcpRelay relay(cluster->root->port());
  ASSERT_NE(relay.port(), 0);
  ServerConfig config = LoopbackConfig();
  config.parent_address = absl::StrCat("127.0.0.1:", relay.port());
  config.node_id = "behind-relay";  // A; its keepalive (10 s) outlasts the claim deadline (5 s)
  absl::StatusOr<std::unique_ptr<FedaggServer>> a = FedaggServer::Start(config);
  ASSERT_TRUE(a.ok()) << a.status();
  const int b_port = cluster->intermediates[0]->port();

  ControlClient control(Connect(cluster->root->port()));
  ASSERT_TRUE(control.Create(Int64SumSpec("lost-answer")).ok());
  for (int port : {(*a)->port(), b_port}) {
    ControlClient mirror(Connect(port));
    ASSERT_TRUE(Eventually([&] { return mirror.Get("lost-answer").ok(); }));
  }
  CallOptions once;
  once.max_attempts = 1;
  auto send = [&](int port) -> absl::StatusOr<v1::Ack> {
    absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(Connect(port), "client-1", once);
    if (!stream.ok()) return stream.status();
    return (*stream)->Contribute(Int64SumSpec("lost-answer"), Int64Update({1, 1001}));
  };
  // Joined first (an update through A is counted, so A's link works), then the root's
  // answers are dropped.
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(Connect((*a)->port()), "client-0", once);
    return stream.ok() && (*stream)->Contribute(Int64SumSpec("lost-answer"), Int64Update({1, 1000})).ok();
  }));
  relay.set_drop_server_bytes(true);
  absl::StatusOr<v1::Ack> through_a = send((*a)->port());
  ASSERT_FALSE(through_a.ok());
  EXPECT_EQ(through_a.status().code(), absl::StatusCode::kUnavailable) << through_a.status();
  EXPECT_THAT(std::string(through_a.status().message()), HasSubstr("could not claim the client id at the parent"));
  // The release goes out again every sync interval until the root takes it (its answers
  // are dropped, but the request arrives): then B may count the client.
  absl::StatusOr<v1::Ack> through_b;
  ASSERT_TRUE(Eventually([&] { return (through_b = send(b_port)).ok(); })) << through_b.status();
  relay.set_drop_server_bytes(false);

  ASSERT_TRUE(control.Seal("lost-answer").ok());
  absl::StatusOr<v1::AggregationStatus> final = control.WatchUntilFinal("lost-answer");
  ASSERT_TRUE(final.ok()) << final.status();
  ASSERT_EQ(final->state(), v1::FINALIZED) << final->detail();
  absl::StatusOr<AggregateResult> result = control.GetResult("lost-answer");
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int64_t> sum(2);
  std::memcpy(sum.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(sum, (std::vector<int64_t>{2, 2001}));  // client 0 through A, client 1 once, through B
}

}  // namespace
}  // namespace fedagg::testing
