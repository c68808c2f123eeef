// Every refusal of the service, one by one: the status code, a message a person can act
// on, nothing counted, and the stream still usable for a good update afterwards.
#include <cmath>
#include <fstream>

#include "service/core/crc32c.h"
#include "tests/integration/test_cluster.h"

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

  // Asserts the rejection, that nothing was counted, and that a valid update still goes
  // through on the same stream.
  void ExpectRejected(const absl::StatusOr<v1::Ack>& answer, absl::StatusCode code,
                      const std::string& message_part) {
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().code(), code) << answer.status();
    EXPECT_NE(answer.status().message().find(message_part), std::string::npos) << answer.status();
    EXPECT_EQ(Contributions(), 0);
    absl::StatusOr<v1::Ack> good = stream_->Contribute(spec_, Good());
    ASSERT_TRUE(good.ok()) << "stream unusable after a rejection: " << good.status();
    EXPECT_EQ(good->contributions(), 1);
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

TEST_F(RejectionTest, ChunkOverrunsItsSection) {
  std::vector<v1::ContributeRequest> requests(3);
  v1::UpdateHeader* header = requests[0].mutable_header();
  header->set_aggregation_id("r");
  header->add_fields();
  header->add_fields();
  v1::Chunk* chunk = requests[1].mutable_chunk();
  chunk->set_section(v1::VALUES);
  chunk->set_data(std::string(20, '\0'));
  requests[2].mutable_end();
  ExpectRejected(stream_->SendRaw(requests), absl::StatusCode::kInvalidArgument, "overruns field 0");
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
}

TEST_F(RejectionTest, SealedAggregation) {
  ASSERT_TRUE(control_->Seal("r").ok());
  absl::StatusOr<v1::Ack> late = stream_->Contribute(spec_, Good());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("accepts no more updates"), std::string::npos) << late.status();
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
  EXPECT_EQ(anonymous.Create(spec).status().code(), absl::StatusCode::kUnauthenticated);
  ControlClient wrong(Connect(cluster->root->port()), CallOptions{"guess"});
  EXPECT_EQ(wrong.Create(spec).status().code(), absl::StatusCode::kUnauthenticated);
  ControlClient operator_client(Connect(cluster->root->port()), CallOptions{"s3cret"});
  ASSERT_TRUE(operator_client.Create(spec).ok());

  auto rejected = ContributeStream::Open(Connect(cluster->root->port()), "c");
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(operator_client.Get("auth")->contributions(), 0);
  auto accepted = ContributeStream::Open(Connect(cluster->root->port()), "c", CallOptions{"s3cret"});
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  std::vector<float> one = {1.0f};
  EXPECT_TRUE((*accepted)->Contribute(spec, UpdateView{{FieldValue::Dense<float>(one)}, std::nullopt}).ok());
}

}  // namespace
}  // namespace fedagg::testing
