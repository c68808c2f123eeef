// Client disconnects at every step of the update protocol (docs/PROTOCOL.md, sections 3.1,
// 3.7 and 4): a Contribute or a Submit call is cut — the client cancels it, or its TCP
// connection is lost — after each message the client can send, once the server has handled
// that message. For every cut:
//  - an update cut before its UpdateEnd left nothing behind: no contribution, the memory
//    budget's accounted bytes and the open streams back to what they were, the client id
//    free, so the client's resend is counted;
//  - an update cut after its UpdateEnd, before the client read the answer, was counted
//    exactly once: the resend is answered ALREADY_EXISTS;
//  - the server still serves another client, and the result holds exactly the two updates.
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tests/integration/http_get.h"
#include "tests/integration/raw_streams.h"
#include "tests/integration/tcp_relay.h"

namespace fedagg::testing {
namespace {

enum class Call { kContribute, kSubmit };
// The last message the client sent before the cut.
enum class Step { kNothing, kHello, kHeader, kFirstChunk, kLastChunk, kUpdateEnd };
enum class Cut { kClientCancels, kConnectionLost };

struct Disconnect {
  Call call;
  Step step;
  Cut cut;
};

// Every step of both calls (Submit has no Hello), each cut both ways.
std::vector<Disconnect> EveryDisconnect() {
  std::vector<Disconnect> all;
  for (Call call : {Call::kContribute, Call::kSubmit}) {
    for (Step step : {Step::kNothing, Step::kHello, Step::kHeader, Step::kFirstChunk, Step::kLastChunk,
                      Step::kUpdateEnd}) {
      if (call == Call::kSubmit && step == Step::kHello) continue;
      for (Cut cut : {Cut::kClientCancels, Cut::kConnectionLost}) all.push_back({call, step, cut});
    }
  }
  return all;
}

std::string Name(const Disconnect& disconnect) {
  static const char* const kSteps[] = {"BeforeAnyMessage", "AfterHello",     "AfterHeader",
                                       "AfterFirstChunk",  "AfterLastChunk", "AfterUpdateEnd"};
  return absl::StrCat(disconnect.call == Call::kContribute ? "Contribute" : "Submit",
                      kSteps[static_cast<int>(disconnect.step)],
                      disconnect.cut == Cut::kClientCancels ? "ClientCancels" : "ConnectionLost");
}
std::string NameOf(const ::testing::TestParamInfo<Disconnect>& info) { return Name(info.param); }
// How gtest (and ctest's test list) shows a case.
void PrintTo(const Disconnect& disconnect, std::ostream* os) { *os << Name(disconnect); }

// One Contribute or Submit call driven message by message, cut when the test says.
class CutCall {
 public:
  CutCall(Call call, int port) : stub_(v1::Aggregation::NewStub(Connect(port))) {
    if (call == Call::kContribute) {
      contribute_ = stub_->Contribute(&context_);
    } else {
      submit_ = stub_->Submit(&context_, &submit_response_);
    }
  }
  ~CutCall() {
    context_.TryCancel();
    if (contribute_ != nullptr) (void)contribute_->Finish();
    if (submit_ != nullptr) (void)submit_->Finish();
  }

  // Sends the Hello, header, chunk or end in `request` (as a SubmitRequest on Submit).
  bool Write(const v1::ContributeRequest& request) {
    if (contribute_ != nullptr) return contribute_->Write(request);
    v1::SubmitRequest submit;
    if (request.has_header()) *submit.mutable_header() = request.header();
    if (request.has_chunk()) *submit.mutable_chunk() = request.chunk();
    if (request.has_end()) *submit.mutable_end() = request.end();
    return submit_->Write(submit);
  }
  // Contribute: reads the server's answer to Hello.
  bool ReadWelcome() {
    v1::ContributeResponse welcome;
    return contribute_ != nullptr && contribute_->Read(&welcome) && welcome.has_welcome();
  }
  void Cancel() { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<v1::Aggregation::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ContributeRequest, v1::ContributeResponse>> contribute_;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> submit_;
  v1::SubmitResponse submit_response_;
};

class DisconnectTest : public ::testing::TestWithParam<Disconnect> {
 protected:
  static constexpr char kClient[] = "cut-client";

  void SetUp() override {
    cluster_ = Cluster::Start(/*intermediates=*/0);
    ASSERT_NE(cluster_, nullptr);
    control_ = std::make_unique<ControlClient>(Connect(port()));
    ASSERT_TRUE(control_->Create(spec_).ok());
    idle_bytes_ = budget().used();  // the accumulator alone
    ASSERT_GT(idle_bytes_, 0u);
  }

  int port() const { return cluster_->root->port(); }
  const MemoryBudget& budget() const { return cluster_->root->memory_budget(); }
  int64_t Contributions() {
    absl::StatusOr<v1::AggregationStatus> status = control_->Get(spec_.aggregation_id());
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() ? status->contributions() : -1;
  }
  std::optional<double> Metric(const std::string& sample) {
    return MetricSample(cluster_->root->metrics_port(), sample);
  }

  // The messages of the call up to and including `step`: Hello (Contribute only), the
  // header, the update's 16 bytes in two chunks, the end.
  std::vector<v1::ContributeRequest> MessagesThrough(Call call, Step step) const {
    const std::string bytes(reinterpret_cast<const char*>(values_.data()), values_.size() * sizeof(int64_t));
    v1::ContributeRequest hello;
    hello.mutable_hello()->set_protocol_version(1);
    hello.mutable_hello()->set_client_id(kClient);
    v1::ContributeRequest header = HeaderRequest(spec_.aggregation_id(), 1);
    header.mutable_header()->set_client_id(kClient);  // read by Submit, ignored by Contribute
    const std::vector<std::pair<Step, v1::ContributeRequest>> all = {
        {Step::kHello, hello},
        {Step::kHeader, header},
        {Step::kFirstChunk, ChunkRequest(0, 0, bytes.substr(0, 8))},
        {Step::kLastChunk, ChunkRequest(0, 8, bytes.substr(8))},
        {Step::kUpdateEnd, EndRequest(bytes)}};
    std::vector<v1::ContributeRequest> messages;
    for (const auto& [message_step, message] : all) {
      if (message_step > step) break;
      if (message_step == Step::kHello && call == Call::kSubmit) continue;
      messages.push_back(message);
    }
    return messages;
  }

  // Waits until the server has handled the message of `step`, so that the cut finds the
  // state that message left.
  bool ServerHandled(Step step, CutCall& call) {
    switch (step) {
      case Step::kNothing:
        return true;
      case Step::kHello:
        return call.ReadWelcome();
      case Step::kHeader:  // the update's buffer is claimed from the budget
        return Eventually([&] { return budget().used() > idle_bytes_; });
      case Step::kFirstChunk:
        return Eventually([&] { return Metric("fedagg_payload_bytes_total") == 8.0; });
      case Step::kLastChunk:
        return Eventually([&] { return Metric("fedagg_payload_bytes_total") == 16.0; });
      case Step::kUpdateEnd:
        return Eventually([&] { return Contributions() == 1; });
    }
    return false;
  }

  // The client's update sent again on a new call of the same kind, as after a break.
  absl::StatusOr<v1::Ack> Resend(Call call) {
    const UpdateView update = Int64Update(values_);
    if (call == Call::kSubmit) return SubmitUpdate(Connect(port()), kClient, spec_, update);
    absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(Connect(port()), kClient);
    if (!stream.ok()) return stream.status();
    return (*stream)->Contribute(spec_, update);
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ControlClient> control_;
  const v1::AggregationSpec spec_ = Int64SumSpec("cut");
  const std::vector<int64_t> values_ = {7, 700};
  uint64_t idle_bytes_ = 0;
};

TEST_P(DisconnectTest, NothingHalfAppliedAndTheClientMaySendAgain) {
  const Disconnect disconnect = GetParam();
  const bool counted = disconnect.step == Step::kUpdateEnd;
  TcpRelay relay(port());  // the path of calls whose connection is lost
  ASSERT_NE(relay.port(), 0);
  {
    CutCall call(disconnect.call, disconnect.cut == Cut::kConnectionLost ? relay.port() : port());
    for (const v1::ContributeRequest& message : MessagesThrough(disconnect.call, disconnect.step)) {
      ASSERT_TRUE(call.Write(message));
    }
    ASSERT_TRUE(ServerHandled(disconnect.step, call));
    if (disconnect.cut == Cut::kConnectionLost) {
      relay.CutConnections();
    } else {
      call.Cancel();
    }
  }

  // What the call held is released: the update's buffer (once counted: its place in the
  // pending batch, reduced within --flush_interval_ms) and the stream.
  EXPECT_TRUE(Eventually([&] { return budget().used() == idle_bytes_; }))
      << budget().used() << " bytes accounted, " << idle_bytes_ << " before the call";
  EXPECT_TRUE(Eventually([&] { return Metric("fedagg_active_streams") == 0.0; }));
  EXPECT_EQ(Contributions(), counted ? 1 : 0);

  absl::StatusOr<v1::Ack> resent = Resend(disconnect.call);
  if (counted) {
    EXPECT_EQ(resent.status().code(), absl::StatusCode::kAlreadyExists) << resent.status();
  } else {
    ASSERT_TRUE(resent.ok()) << resent.status();
    EXPECT_EQ(resent->contributions(), 1);
  }
  EXPECT_EQ(Contributions(), 1);

  // The server serves other clients as before; the result is the two updates, each once.
  const std::vector<int64_t> other = {1, 10000};
  absl::StatusOr<v1::Ack> another = SubmitUpdate(Connect(port()), "another-client", spec_, Int64Update(other));
  ASSERT_TRUE(another.ok()) << another.status();
  EXPECT_EQ(another->contributions(), 2);
  ASSERT_TRUE(control_->Seal(spec_.aggregation_id()).ok());
  absl::StatusOr<AggregateResult> result = control_->GetResult(spec_.aggregation_id());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 2);
  std::vector<int64_t> sum(2);
  std::memcpy(sum.data(), result->fields.at(0).value.bytes.data(), sizeof(int64_t) * 2);
  EXPECT_EQ(sum, (std::vector<int64_t>{8, 10700}));
}

INSTANTIATE_TEST_SUITE_P(EveryStep, DisconnectTest, ::testing::ValuesIn(EveryDisconnect()), NameOf);

}  // namespace
}  // namespace fedagg::testing
