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
  absl::StatusOr<std::unique_ptr<FedaggServer>> root = FedaggServer::Start(LoopbackConfig());
  ASSERT_TRUE(root.ok()) << root.status();
  TcpRelay relay((*root)->port());
  ASSERT_NE(relay.port(), 0);
  ServerConfig child = LoopbackConfig();
  child.parent_address = absl::StrCat("127.0.0.1:", relay.port());
  child.node_id = "edge";
  child.parent_keepalive = FedaggServer::kMinParentKeepalive;
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

}  // namespace
}  // namespace fedagg::testing
