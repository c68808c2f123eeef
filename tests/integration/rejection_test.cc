// Every refusal of the service, one by one: the status code, a message a person can act
// on, nothing counted, the stream still usable for a good update afterwards, and the
// final result exactly that good update's. docs/RELIABILITY.md maps each bad input to
// its test here (or in limits_test.cc, tests/core).
#include <cmath>
#include <fstream>

#include "service/core/crc32c.h"
#include "tests/integration/http_get.h"
#include "tests/integration/raw_streams.h"

namespace fedagg::testing {
namespace {

class RejectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = Cluster::Start(0);
    ASSERT_NE(cluster_, nullptr);
    control_ = std::make_unique<ControlClient>(Connect(cluster_->root->port()));
    spec_ = MakeSpec("r", {{"w", "float32[4]", Intrinsic::kFederatedSum},
                           {"s", "float32[10]", Intrinsic::kSparseSum}});
    spec_.set_require_finite(true);
    ASSERT_TRUE(control_->Create(spec_).ok());
    auto stream = ContributeStream::Open(Connect(cluster_->root->port()), "client");
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
  }

  int64_t Contributions() { return control_->Get("r")->contributions(); }

  // Asserts the rejection, that nothing was counted, that a valid update still goes
  // through on the same stream, and that the result holds that update alone.
  void ExpectRejected(const absl::StatusOr<v1::Ack>& answer, absl::StatusCode code,
                      const std::string& message_part) {
    ASSERT_FALSE(answer.ok());
    ExpectRefused(answer.status(), code, message_part);
  }
  void ExpectRefused(const absl::Status& status, absl::StatusCode code, const std::string& message_part) {
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_NE(status.message().find(message_part), std::string::npos) << status;
    ExpectUnharmed();
  }
  // Nothing counted; a good update goes through; the result is that update's alone.
  void ExpectUnharmed() {
    EXPECT_EQ(Contributions(), 0);
    absl::StatusOr<v1::Ack> good = stream_->Contribute(spec_, Good());
    ASSERT_TRUE(good.ok()) << "stream unusable after a rejection: " << good.status();
    EXPECT_EQ(good->contributions(), 1);
    ExpectResultOfGoodAlone();
  }
  void ExpectResultOfGoodAlone() {
    ASSERT_TRUE(control_->Seal("r").ok());
    absl::StatusOr<AggregateResult> result = control_->GetResult("r");
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->contributions, 1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(result->fields[0].value.values<float>()[i], dense_[i]);
    const std::vector<float> sparse_sum = {0.5f, 0, 0, 0, 0, 0, 0, 0, 0, -0.5f};
    for (int i = 0; i < 10; ++i) EXPECT_EQ(result->fields[1].value.values<float>()[i], sparse_sum[i]);
  }

  UpdateView Good() {
    return UpdateView{{FieldValue::Dense<float>(dense_), FieldValue::Sparse<float>(indices_, sparse_)},
                      std::nullopt};
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ControlClient> control_;
  v1::AggregationSpec spec_;
  std::unique_ptr<ContributeStream> stream_;
  std::vector<float> dense_ = {1, 2, 3, 4};
  std::vector<int64_t> indices_ = {0, 9};
  std::vector<float> sparse_ = {0.5f, -0.5f};
};

// A model the node cannot hold is refused when it is created (it used to end the server
// on a failed allocation, and every aggregation in it with it).
TEST_F(RejectionTest, AModelLargerThanTheNodeIsRefusedAtCreation) {
  const absl::StatusOr<v1::AggregationStatus> created =
      control_->Create(MakeSpec("huge", {{"w", "float32[1099511627776]", Intrinsic::kFederatedSum}}));
  ASSERT_FALSE(created.ok());
  ExpectRefused(created.status(), absl::StatusCode::kResourceExhausted, "run them on nodes with more memory");
  EXPECT_EQ(control_->Get("huge").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RejectionTest, UnknownAggregation) {
  ExpectRejected(stream_->ContributeUnchecked("nope", Good()), absl::StatusCode::kNotFound,
                 "no aggregation 'nope'");
}

TEST_F(RejectionTest, WrongDtype) {
  std::vector<double> wide = {1, 2, 3, 4};
  UpdateView update = Good();
  update.fields[0] = FieldValue::Dense<double>(wide);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "sent dtype DTYPE_FLOAT64, declared float32");
}

TEST_F(RejectionTest, WrongShape) {
  std::vector<float> short_values = {1, 2, 3};
  UpdateView update = Good();
  update.fields[0] = FieldValue::Dense<float>(short_values);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "incomplete: 12 of 16 bytes");
}

TEST_F(RejectionTest, WrongFieldCount) {
  UpdateView update = Good();
  update.fields.pop_back();
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "describes 1 fields");
}

TEST_F(RejectionTest, SparseIndexOutOfRange) {
  std::vector<int64_t> bad = {0, 10};
  UpdateView update = Good();
  update.fields[1] = FieldValue::Sparse<float>(bad, sparse_);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "index 10 at position 1 is out of range [0, 10)");
}

TEST_F(RejectionTest, NegativeSparseIndex) {
  std::vector<int64_t> bad = {-1, 3};
  UpdateView update = Good();
  update.fields[1] = FieldValue::Sparse<float>(bad, sparse_);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "index -1 at position 0 is out of range");
}

TEST_F(RejectionTest, NonFiniteWhenFiniteRequired) {
  std::vector<float> nan_values = {1, NAN, 3, 4};
  UpdateView update = Good();
  update.fields[0] = FieldValue::Dense<float>(nan_values);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "requires finite values");
}

TEST_F(RejectionTest, WeightOnAnUnweightedAggregation) {
  UpdateView update = Good();
  update.weight = 2.0;
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "send the update without a weight");
}

TEST_F(RejectionTest, ChecksumMismatch) {
  std::vector<v1::ContributeRequest> requests(4);
  v1::UpdateHeader* header = requests[0].mutable_header();
  header->set_aggregation_id("r");
  header->add_fields();
  header->add_fields()->set_nnz(0);
  v1::Chunk* chunk = requests[1].mutable_chunk();
  chunk->set_field(0);
  chunk->set_section(v1::VALUES);
  chunk->set_data(std::string(reinterpret_cast<const char*>(dense_.data()), 16));
  requests[2].mutable_end()->set_crc32c(12345);
  requests.resize(3);
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kDataLoss, "checksum mismatch");
}

// Sections may arrive in any order; the checksum is over wire order (field 0 indices, field
// 0 values, field 1 indices, ...) whatever the order of arrival.
std::vector<v1::ContributeRequest> SectionsBackToFront(const std::vector<float>& dense, const std::vector<int64_t>& indices,
                                                       const std::vector<float>& sparse, bool checksum_in_wire_order) {
  v1::ContributeRequest header = HeaderRequest("r", 2);
  header.mutable_header()->mutable_fields(1)->set_nnz(2);
  const std::string index_bytes(reinterpret_cast<const char*>(indices.data()), indices.size() * sizeof(int64_t));
  v1::ContributeRequest index_chunk = ChunkRequest(1, 0, index_bytes);
  index_chunk.mutable_chunk()->set_section(v1::INDICES);
  const std::string wire_order = BytesOf(dense) + index_bytes + BytesOf(sparse);
  const std::string arrival_order = BytesOf(sparse) + index_bytes + BytesOf(dense);
  return {header, ChunkRequest(1, 0, BytesOf(sparse)), index_chunk, ChunkRequest(0, 0, BytesOf(dense)),
          EndRequest(checksum_in_wire_order ? wire_order : arrival_order)};
}

TEST_F(RejectionTest, ChecksumOverArrivalOrderInsteadOfWireOrder) {
  ExpectRejected(stream_->SendRaw(SectionsBackToFront(dense_, indices_, sparse_, false)), absl::StatusCode::kDataLoss,
                 "checksum mismatch");
}

TEST_F(RejectionTest, SectionsOutOfWireOrderAreAccepted) {
  absl::StatusOr<v1::Ack> ack = stream_->SendRaw(SectionsBackToFront(dense_, indices_, sparse_, true));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->contributions(), 1);
  ExpectResultOfGoodAlone();
}

TEST_F(RejectionTest, ChunksOutOfOrder) {
  std::vector<v1::ContributeRequest> requests(4);
  v1::UpdateHeader* header = requests[0].mutable_header();
  header->set_aggregation_id("r");
  header->add_fields();
  header->add_fields();
  v1::Chunk* second_half = requests[1].mutable_chunk();
  second_half->set_section(v1::VALUES);
  second_half->set_offset(8);
  second_half->set_data(std::string(8, '\0'));
  v1::Chunk* first_half = requests[2].mutable_chunk();
  first_half->set_section(v1::VALUES);
  first_half->set_data(std::string(8, '\0'));
  requests[3].mutable_end();
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument, "out of order");
}

// An update of `dense_bytes` of values for field 0 ('w', float32[4]: 16 bytes declared)
// and nothing for the sparse field, as raw requests.
std::vector<v1::ContributeRequest> DenseValuesOfSize(size_t dense_bytes) {
  std::vector<v1::ContributeRequest> requests(3);
  v1::UpdateHeader* header = requests[0].mutable_header();
  header->set_aggregation_id("r");
  header->add_fields();
  header->add_fields();
  v1::Chunk* chunk = requests[1].mutable_chunk();
  chunk->set_section(v1::VALUES);
  chunk->set_data(std::string(dense_bytes, '\0'));
  requests[2].mutable_end();
  return requests;
}

TEST_F(RejectionTest, ChunkOverrunsItsSection) {
  ExpectRejected(stream_->SendRaw(DenseValuesOfSize(20)), absl::StatusCode::kInvalidArgument,
                 "chunk overruns field 'w' (float32[4], field 0) values: the header declares 16 bytes, "
                 "this chunk would bring it to 20");
}

TEST_F(RejectionTest, DoubleWidthValuesAreNamedAsADtypeMixUp) {
  // float64 values sent for the float32 field without saying so in the header.
  ExpectRejected(stream_->SendRaw(DenseValuesOfSize(32)), absl::StatusCode::kInvalidArgument,
                 "field 'w' (float32[4], field 0) values: the header declares 16 bytes, this chunk "
                 "would bring it to 32 (2x the declared size: were 8-byte elements sent where the "
                 "field declares 4-byte float32? convert the array to float32 before sending)");
}

TEST_F(RejectionTest, OversizeDeclaredUpdate) {
  std::vector<v1::ContributeRequest> requests(2);
  v1::UpdateHeader* header = requests[0].mutable_header();
  header->set_aggregation_id("r");
  header->add_fields();
  header->add_fields()->set_nnz(int64_t{1} << 40);
  requests[1].mutable_end();
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument,
                 "exceed the update size limit");
}

TEST_F(RejectionTest, DuplicateClient) {
  ASSERT_TRUE(stream_->Contribute(spec_, Good()).ok());
  absl::StatusOr<v1::Ack> again = stream_->Contribute(spec_, Good());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("counted once"), std::string::npos);
  EXPECT_EQ(Contributions(), 1);
  // Also from another stream, and while the first copy is in flight elsewhere.
  auto other = ContributeStream::Open(Connect(cluster_->root->port()), "client");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->Contribute(spec_, Good()).status().code(), absl::StatusCode::kAlreadyExists);
  ExpectResultOfGoodAlone();
}

TEST_F(RejectionTest, DuplicateClientInFlight) {
  RawContributeStream first(cluster_->root->port(), "twin");
  ASSERT_TRUE(first.open());
  ASSERT_TRUE(first.Write(HeaderRequest("r", 2)));
  // The first header is handled on another thread: the twin comes once the server holds
  // it in flight (before that, the twin's update would rightly be the one counted).
  const int metrics_port = cluster_->root->metrics_port();
  ASSERT_TRUE(Eventually([&] { return MetricSample(metrics_port, "fedagg_updates_in_flight") == 1.0; }))
      << "the first update never showed as in flight";
  auto second = ContributeStream::Open(Connect(cluster_->root->port()), "twin");
  ASSERT_TRUE(second.ok());
  const absl::StatusOr<v1::Ack> answer = (*second)->Contribute(spec_, Good());
  ExpectRejected(answer, absl::StatusCode::kAborted, "is in flight; wait for its ack");
}

TEST_F(RejectionTest, SealedAggregation) {
  ASSERT_TRUE(control_->Seal("r").ok());
  absl::StatusOr<v1::Ack> late = stream_->Contribute(spec_, Good());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("accepts no more updates"), std::string::npos) << late.status();
  EXPECT_EQ(Contributions(), 0);
  // Nothing changed: with no contribution the sealed aggregation fails its quorum.
  EXPECT_EQ(control_->Get("r")->state(), v1::FAILED);
  EXPECT_NE(control_->Get("r")->detail().find("0 contributions"), std::string::npos);
}

TEST_F(RejectionTest, CancelledAggregation) {
  ASSERT_TRUE(control_->Cancel("r", "test").ok());
  absl::StatusOr<v1::Ack> late = stream_->Contribute(spec_, Good());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("is CANCELLED (test) and accepts no more updates"), std::string::npos)
      << late.status();
  EXPECT_EQ(Contributions(), 0);
  // The stream goes on with another aggregation.
  v1::AggregationSpec other = spec_;
  other.set_aggregation_id("r2");
  ASSERT_TRUE(control_->Create(other).ok());
  absl::StatusOr<v1::Ack> good = stream_->Contribute(other, Good());
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->contributions(), 1);
}

TEST_F(RejectionTest, MalformedProtobufOnContribute) {
  v1::ContributeRequest hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id("garbled");
  const absl::Status status = CallWithRawBytes(cluster_->root->port(), "/fedagg.v1.Aggregation/Contribute",
                                               {hello.SerializeAsString(), HeaderRequest("r", 2).SerializeAsString(),
                                                std::string("\xff\xff\xff\xff", 4)});
  ExpectRefused(status, absl::StatusCode::kInvalidArgument,
                "malformed protobuf: a message of 4 bytes is not a valid fedagg.v1.ContributeRequest");
}

TEST_F(RejectionTest, MalformedProtobufOnSubmit) {
  const absl::Status status = CallWithRawBytes(cluster_->root->port(), "/fedagg.v1.Aggregation/Submit",
                                               {std::string("\x0a\x05" "ab", 4)});
  ExpectRefused(status, absl::StatusCode::kInvalidArgument, "is not a valid fedagg.v1.SubmitRequest");
}

TEST_F(RejectionTest, MalformedProtobufOnTypedMethodsNamesTheMethodAndType) {
  // Unary and server-streaming methods, whose requests gRPC parses: each refusal says which
  // method and which message type, and the server is unharmed.
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"/fedagg.v1.Control/CreateAggregation", "fedagg.v1.CreateAggregationRequest"},
      {"/fedagg.v1.Control/GetResult", "fedagg.v1.GetResultRequest"},
      {"/fedagg.v1.Aggregation/GetTask", "fedagg.v1.GetTaskRequest"},
      {"/fedagg.v1.Tier/Join", "fedagg.v1.JoinRequest"},
      {"/fedagg.v1.Tier/ClaimClients", "fedagg.v1.ClaimClientsRequest"},
  };
  for (const auto& [method, type] : methods) {
    const absl::Status status = CallWithRawBytes(cluster_->root->port(), method, {std::string("\xff\xff\xff\xff", 4)});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << method << ": " << status;
    EXPECT_EQ(status.message(), absl::StrCat("malformed protobuf: the request to ", method, " is not a valid ", type,
                                             "; check that the client encodes its requests with fedagg's "
                                             "proto/fedagg/v1 definitions"));
  }
  // A method that does not exist keeps gRPC's UNIMPLEMENTED.
  EXPECT_EQ(CallWithRawBytes(cluster_->root->port(), "/fedagg.v1.Control/NoSuchMethod", {std::string("\x08\x01", 2)}).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(control_->List()->size(), 1u);
  ExpectUnharmed();
}

TEST_F(RejectionTest, RowIdOutOfRange) {
  const v1::AggregationSpec rows = MakeSpec("rows", {{"e", "float32[4,2]", Intrinsic::kRowSparseSum}});
  ASSERT_TRUE(control_->Create(rows).ok());
  std::vector<int64_t> bad_rows = {1, 4};
  std::vector<float> values = {1, 2, 3, 4};
  absl::StatusOr<v1::Ack> answer = stream_->ContributeUnchecked(
      "rows", UpdateView{{FieldValue::RowSparse<float>(bad_rows, values)}, std::nullopt});
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument) << answer.status();
  EXPECT_NE(answer.status().message().find("row id 4 at position 1 is out of range [0, 4)"), std::string::npos)
      << answer.status();
  EXPECT_EQ(control_->Get("rows")->contributions(), 0);
  std::vector<int64_t> good_rows = {1, 3};
  ASSERT_TRUE(stream_->Contribute(rows, UpdateView{{FieldValue::RowSparse<float>(good_rows, values)}, std::nullopt}).ok());
  ASSERT_TRUE(control_->Seal("rows").ok());
  absl::StatusOr<AggregateResult> result = control_->GetResult("rows");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 1);
  const std::vector<float> expected = {0, 0, 1, 2, 0, 0, 3, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(result->fields[0].value.values<float>()[i], expected[i]);
}

TEST_F(RejectionTest, NnzMismatchBetweenIndicesAndValues) {
  // The header declares 2 sparse entries; the client sends 2 indices but 1 value.
  std::vector<v1::ContributeRequest> requests;
  v1::ContributeRequest header = HeaderRequest("r", 2);
  header.mutable_header()->mutable_fields(1)->set_nnz(2);
  requests.push_back(header);
  requests.push_back(ChunkRequest(0, 0, BytesOf(dense_)));
  v1::ContributeRequest indices = ChunkRequest(1, 0, std::string(reinterpret_cast<const char*>(indices_.data()), 16));
  indices.mutable_chunk()->set_section(v1::INDICES);
  requests.push_back(indices);
  requests.push_back(ChunkRequest(1, 0, BytesOf({0.5f})));
  requests.push_back(EndRequest(""));
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument,
                 "update ended with field 's' (float32[10], field 1) values incomplete: 4 of 8 bytes received");
}

TEST_F(RejectionTest, ChunksOverlapping) {
  std::vector<v1::ContributeRequest> requests = {HeaderRequest("r", 2), ChunkRequest(0, 0, std::string(8, '\0')),
                                                 ChunkRequest(0, 4, std::string(8, '\0')), EndRequest("")};
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument,
                 "at offset 4 is out of order: 8 bytes of that section were received");
}

TEST_F(RejectionTest, ChunkMissing) {
  // A gap: bytes 8..11 never sent.
  std::vector<v1::ContributeRequest> requests = {HeaderRequest("r", 2), ChunkRequest(0, 0, std::string(8, '\0')),
                                                 ChunkRequest(0, 12, std::string(4, '\0')), EndRequest("")};
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument,
                 "at offset 12 is out of order: 8 bytes of that section were received");
}

TEST_F(RejectionTest, OversizeTotalUpdate) {
  // Each field fits, the update as a whole does not: the server's limit here is 1 MiB.
  ServerConfig config = LoopbackConfig();
  config.max_update_bytes = 1 << 20;
  auto small = Cluster::Start(0, config);
  ASSERT_NE(small, nullptr);
  ControlClient control(Connect(small->root->port()));
  const v1::AggregationSpec big = MakeSpec("big", {{"a", "float32[200000]", Intrinsic::kFederatedSum},
                                                   {"b", "float32[200000]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(big).ok());
  const uint64_t accumulators = small->root->memory_budget().used();
  auto stream = ContributeStream::Open(Connect(small->root->port()), "c");
  ASSERT_TRUE(stream.ok());
  absl::StatusOr<v1::Ack> answer = (*stream)->SendRaw({HeaderRequest("big", 2), EndRequest("")});
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument) << answer.status();
  EXPECT_NE(answer.status().message().find("update of at least 1600000 bytes exceeds the size limit of 1048576 bytes"),
            std::string::npos)
      << answer.status();
  EXPECT_EQ(control.Get("big")->contributions(), 0);
  EXPECT_EQ(small->root->memory_budget().used(), accumulators);  // refused before allocating
}

TEST_F(RejectionTest, InfinityWhenFiniteRequired) {
  std::vector<float> inf_values = {INFINITY, 1};
  UpdateView update = Good();
  update.fields[1] = FieldValue::Sparse<float>(indices_, inf_values);
  ExpectRejected(stream_->ContributeUnchecked("r", update), absl::StatusCode::kInvalidArgument,
                 "holds NaN or Inf, and this aggregation requires finite values");
}

TEST_F(RejectionTest, InvalidWeights) {
  const v1::AggregationSpec weighted = MakeSpec("wm", {{"w", "float32[2]", Intrinsic::kFederatedWeightedMean}});
  ASSERT_TRUE(control_->Create(weighted).ok());
  std::vector<float> values = {2, 4};
  for (double weight : {-1.0, 0.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    absl::StatusOr<v1::Ack> answer =
        stream_->ContributeUnchecked("wm", UpdateView{{FieldValue::Dense<float>(values)}, weight});
    ASSERT_FALSE(answer.ok()) << weight;
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument) << answer.status();
    EXPECT_NE(answer.status().message().find("it must be finite and greater than 0"), std::string::npos)
        << answer.status();
  }
  absl::StatusOr<v1::Ack> missing =
      stream_->ContributeUnchecked("wm", UpdateView{{FieldValue::Dense<float>(values)}, std::nullopt});
  EXPECT_NE(missing.status().message().find("send a weight with the update"), std::string::npos) << missing.status();
  EXPECT_EQ(control_->Get("wm")->contributions(), 0);
  ASSERT_TRUE(stream_->Contribute(weighted, UpdateView{{FieldValue::Dense<float>(values)}, 3.0}).ok());
  ASSERT_TRUE(control_->Seal("wm").ok());
  absl::StatusOr<AggregateResult> result = control_->GetResult("wm");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->contributions, 1);
  EXPECT_EQ(result->weight_sum, 3.0);
  EXPECT_FLOAT_EQ(result->fields[0].value.values<float>()[1], 4.0f);
}

TEST_F(RejectionTest, InvalidSpecIsRefusedAtCreation) {
  v1::AggregationSpec bad = MakeSpec("bad id!", {{"w", "float32[2]", Intrinsic::kFederatedSum}});
  absl::StatusOr<v1::AggregationStatus> created = control_->Create(bad);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("aggregation id 'bad id!' is invalid"), std::string::npos);
  EXPECT_EQ(control_->Create(spec_).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(AuthenticationTest, TokensAreRequiredWhenConfigured) {
  ServerConfig config = LoopbackConfig();
  config.auth_tokens = {"s3cret"};
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const v1::AggregationSpec spec = MakeSpec("auth", {{"w", "float32[1]", Intrinsic::kFederatedSum}});

  ControlClient anonymous(Connect(cluster->root->port()));
  absl::Status missing = anonymous.Create(spec).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(missing.message().find("missing 'authorization' metadata"), std::string::npos) << missing;
  ControlClient wrong(Connect(cluster->root->port()), CallOptions{"guess"});
  absl::Status refused = wrong.Create(spec).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(refused.message().find("the bearer token is not accepted"), std::string::npos) << refused;
  ControlClient operator_client(Connect(cluster->root->port()), CallOptions{"s3cret"});
  ASSERT_TRUE(operator_client.Create(spec).ok());

  auto rejected = ContributeStream::Open(Connect(cluster->root->port()), "c");
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(rejected.status().message().find("missing 'authorization' metadata"), std::string::npos);
  auto wrong_stream = ContributeStream::Open(Connect(cluster->root->port()), "c", CallOptions{"guess"});
  EXPECT_EQ(wrong_stream.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(wrong_stream.status().message().find("the bearer token is not accepted"), std::string::npos);
  std::vector<float> value = {1.0f};
  EXPECT_EQ(SubmitUpdate(Connect(cluster->root->port()), "c", spec, UpdateView{{FieldValue::Dense<float>(value)}, std::nullopt})
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(operator_client.Get("auth")->contributions(), 0);
  auto accepted = ContributeStream::Open(Connect(cluster->root->port()), "c", CallOptions{"s3cret"});
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  std::vector<float> one = {1.0f};
  EXPECT_TRUE((*accepted)->Contribute(spec, UpdateView{{FieldValue::Dense<float>(one)}, std::nullopt}).ok());
}

}  // namespace
}  // namespace fedagg::testing
