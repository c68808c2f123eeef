// The HTTP path's resumable uploads (docs/PROTOCOL.md 4a) on in-process servers, where the
// sanitizer presets see them: many clients writing at once with every chunk and submit
// repeated, one upload written and submitted from several threads at once, an idle upload
// that expires and gives back its client id, window place and memory, a refusal of the
// memory budget that holds nothing, and an upload through an intermediate aggregator
// counted at the root, an encoded update as its encoding's bytes. (tests/http checks every
// rule of the path over a real process; tests/browser drives it from Chromium.)
#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fedagg/v1/upload.pb.h"
#include "gtest/gtest.h"
#include "service/core/crc32c.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

constexpr int kElements = 10000;  // float32: 40,000 bytes an update

ServerConfig HttpConfig() {
  ServerConfig config = LoopbackConfig();
  config.http_address = "127.0.0.1:0";
  return config;
}

v1::AggregationSpec SumSpec(const std::string& id) {
  return MakeSpec(id, {{"w", absl::StrCat("float32[", kElements, "]"), Intrinsic::kFederatedSum}});
}

// Client c's update: small integers, so every sum is exact in any order.
std::vector<float> UpdateOf(int c) {
  std::vector<float> values(kElements);
  for (int i = 0; i < kElements; ++i) values[i] = static_cast<float>((c * 7 + i) % 13);
  return values;
}

std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// One client's requests to one upload.
class Upload {
 public:
  Upload(int port, std::string aggregation_id, std::string client_id)
      : http_("127.0.0.1", port),
        query_(absl::StrCat("?aggregation_id=", aggregation_id, "&client_id=", client_id)) {}

  // The answer's HTTP status and its UploadStatus (or HttpError) fields.
  struct Answer {
    int http = 0;
    v1::UploadStatus status;
    v1::HttpError error;
  };

  // The header of an update of SumSpec's one dense field.
  Answer Start() { return Read(http_.Post("/v1/uploads" + query_, R"({"fields": [{}]})", "application/json")); }
  Answer Get() { return Read(http_.Get("/v1/uploads" + query_)); }
  Answer Write(uint64_t offset, const std::string& bytes) {
    httplib::Headers headers = {{"Upload-Offset", absl::StrCat(offset)},
                                {"Upload-Crc32c", absl::StrCat(Crc32cExtend(0, bytes.data(), bytes.size()))}};
    return Read(http_.Patch("/v1/uploads" + query_, headers, bytes, "application/octet-stream"));
  }
  Answer Submit(const std::string& update) {
    return Read(http_.Post("/v1/uploads:submit" + query_,
                           absl::StrCat("{\"crc32c\": ", Crc32cExtend(0, update.data(), update.size()), "}"),
                           "application/json"));
  }

 private:
  static Answer Read(const httplib::Result& result) {
    Answer answer;
    if (!result) return answer;
    answer.http = result->status;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    if (result->status < 300) {
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result->body, &answer.status, lenient).ok())
          << result->body;
    } else {
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result->body, &answer.error, lenient).ok())
          << result->body;
    }
    return answer;
  }

  httplib::Client http_;
  std::string query_;
};

// Writes `update` in `chunk`-byte pieces, each twice (the second a repeat), then submits
// twice; both submits must answer COUNTED.
void UploadWithRepeats(Upload& upload, const std::string& update, size_t chunk) {
  Upload::Answer started = upload.Start();
  ASSERT_EQ(started.http, 201) << started.error.message();
  for (size_t offset = 0; offset < update.size(); offset += chunk) {
    const std::string piece = update.substr(offset, chunk);
    for (int repeat = 0; repeat < 2; ++repeat) {
      Upload::Answer written = upload.Write(offset, piece);
      ASSERT_EQ(written.http, 200) << written.error.message();
      ASSERT_EQ(written.status.committed_size(), offset + piece.size());
    }
  }
  for (int repeat = 0; repeat < 2; ++repeat) {
    Upload::Answer submitted = upload.Submit(update);
    ASSERT_EQ(submitted.http, 200) << submitted.error.message();
    ASSERT_EQ(submitted.status.state(), v1::UploadStatus::COUNTED);
  }
}

std::vector<float> ResultOf(FedaggServer& root, const std::string& id) {
  ControlClient control(Connect(root.port()));
  EXPECT_TRUE(control.Seal(id).ok());
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<v1::AggregationStatus> status = control.Get(id);
    return status.ok() && status->state() == v1::FINALIZED;
  }));
  absl::StatusOr<AggregateResult> result = control.GetResult(id);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const std::vector<std::byte>& bytes = result->fields[0].value.bytes;
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

TEST(HttpUploadTest, ConcurrentClientsWithEveryRequestRepeatedAreCountedOnce) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, HttpConfig());
  ASSERT_NE(cluster, nullptr);
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(cluster->root->port())).Create(SumSpec("many"));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  constexpr int kThreads = 6, kClientsEach = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kClientsEach; ++k) {
        const int c = t * kClientsEach + k;
        Upload upload(cluster->root->http_port(), "many", absl::StrCat("client-", c));
        UploadWithRepeats(upload, Bytes(UpdateOf(c)), 4096 + 1000 * k);  // chunks cut across values
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<float> expected(kElements, 0);
  for (int c = 0; c < kThreads * kClientsEach; ++c) {
    const std::vector<float> update = UpdateOf(c);
    for (int i = 0; i < kElements; ++i) expected[i] += update[i];
  }
  EXPECT_EQ(ControlClient(Connect(cluster->root->port())).Get("many")->contributions(), kThreads * kClientsEach);
  EXPECT_EQ(ResultOf(*cluster->root, "many"), expected);
}

TEST(HttpUploadTest, OneUploadWrittenAndSubmittedFromSeveralThreadsAtOnce) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, HttpConfig());
  ASSERT_NE(cluster, nullptr);
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(cluster->root->port())).Create(SumSpec("raced"));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  const std::string update = Bytes(UpdateOf(3));
  ASSERT_EQ(Upload(cluster->root->http_port(), "raced", "c").Start().http, 201);
  // Each thread writes from the committed size it learns, racing the others: a write
  // behind the committed size is a repeat, one ahead of it a gap (409, and the answer says
  // where to go on).
  std::atomic<int> counted{0}, gaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Upload upload(cluster->root->http_port(), "raced", "c");
      uint64_t offset = upload.Get().status.committed_size();
      while (offset < update.size()) {
        Upload::Answer written = upload.Write(offset, update.substr(offset, 3000));
        if (written.http == 409) {
          ++gaps;
          offset = written.error.committed_size();
          continue;
        }
        ASSERT_EQ(written.http, 200) << written.error.message();
        offset = written.status.committed_size();
      }
      Upload::Answer submitted = upload.Submit(update);
      ASSERT_EQ(submitted.http, 200) << submitted.error.message();
      ASSERT_EQ(submitted.status.ack().contributions(), 1);
      ++counted;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counted, 4);
  EXPECT_EQ(ControlClient(Connect(cluster->root->port())).Get("raced")->contributions(), 1);
  EXPECT_EQ(ResultOf(*cluster->root, "raced"), UpdateOf(3));
}

TEST(HttpUploadTest, AnIdleUploadExpiresAndGivesBackItsClientIdWindowAndMemory) {
  ServerConfig config = HttpConfig();
  config.upload_idle_timeout = absl::Milliseconds(300);
  config.memory_budget_bytes = uint64_t{64} << 20;
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  FedaggServer& root = *cluster->root;
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(root.port())).Create(SumSpec("idle"));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  const uint64_t window_before = root.ingest_window()->used();
  const uint64_t memory_before = root.memory_budget().used();
  const std::string update = Bytes(UpdateOf(1));
  Upload upload(root.http_port(), "idle", "c");
  ASSERT_EQ(upload.Start().http, 201);
  ASSERT_EQ(upload.Write(0, update.substr(0, 1000)).http, 200);
  EXPECT_GE(root.ingest_window()->used(), window_before + update.size());
  EXPECT_GE(root.memory_budget().used(), memory_before + update.size());
  // Watched without a request: any request (a GET too) keeps an upload alive.
  ASSERT_TRUE(Eventually([&] { return root.ingest_window()->used() == window_before; }));
  EXPECT_EQ(root.memory_budget().used(), memory_before);
  EXPECT_EQ(upload.Get().error.code(), "NOT_FOUND");
  // The client id is free: the same client's update goes through whole.
  UploadWithRepeats(upload, update, 8192);
  EXPECT_EQ(ResultOf(root, "idle"), UpdateOf(1));
}

TEST(HttpUploadTest, AStartTheMemoryBudgetRefusesHoldsNothing) {
  ServerConfig config = HttpConfig();
  config.memory_budget_bytes = 60000;  // the 40,000-byte accumulator, not an update beside it
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(cluster->root->port())).Create(SumSpec("small"));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    Upload::Answer started = Upload(cluster->root->http_port(), "small", "c").Start();
    EXPECT_EQ(started.http, 429);
    EXPECT_EQ(started.error.code(), "RESOURCE_EXHAUSTED") << started.error.message();
  }
  EXPECT_EQ(cluster->root->memory_budget().used(), 40000);  // the accumulator alone
  EXPECT_EQ(ControlClient(Connect(cluster->root->port())).Get("small")->contributions(), 0);
}

TEST(HttpUploadTest, AnEncodedUpdateTravelsAsItsBytes) {
  // A discretized field (16-bit integers at a scale of 0.25): the upload's bytes are the
  // encoding's, and the result is the integers' exact sum times the scale.
  std::unique_ptr<Cluster> cluster = Cluster::Start(0, HttpConfig());
  ASSERT_NE(cluster, nullptr);
  v1::AggregationSpec spec = MakeSpec("encoded", {{"w", "float32[1000]", Intrinsic::kFederatedSum}});
  v1::FieldEncoding* encoding = spec.mutable_intrinsics(0)->mutable_encoding();
  encoding->set_kind(v1::FieldEncoding::DISCRETIZED);
  encoding->set_bits(16);
  encoding->set_scale(0.25);
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(cluster->root->port())).Create(spec);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  std::vector<int64_t> sum(1000, 0);
  for (int c = 0; c < 3; ++c) {
    std::vector<int16_t> codes(1000);
    for (int i = 0; i < 1000; ++i) codes[i] = static_cast<int16_t>((i * 37 + c * 1001) % 2001 - 1000);
    for (int i = 0; i < 1000; ++i) sum[i] += codes[i];
    Upload upload(cluster->root->http_port(), "encoded", absl::StrCat("client-", c));
    UploadWithRepeats(upload, std::string(reinterpret_cast<const char*>(codes.data()), codes.size() * 2), 700);
  }
  const std::vector<float> result = ResultOf(*cluster->root, "encoded");
  ASSERT_EQ(result.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(result[i], static_cast<float>(sum[i] * 0.25)) << "coordinate " << i;
}

TEST(HttpUploadTest, AnUploadThroughAnIntermediateIsCountedAtTheRoot) {
  std::unique_ptr<Cluster> cluster = Cluster::Start(1, HttpConfig());
  ASSERT_NE(cluster, nullptr);
  {
    absl::StatusOr<v1::AggregationStatus> created = ControlClient(Connect(cluster->root->port())).Create(SumSpec("tree"));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  Upload upload(cluster->intermediates[0]->http_port(), "tree", "c");
  UploadWithRepeats(upload, Bytes(UpdateOf(5)), 16384);
  // Counted once at the root, however often it was submitted.
  ASSERT_TRUE(Eventually([&] { return ControlClient(Connect(cluster->root->port())).Get("tree")->contributions() == 1; }));
  EXPECT_EQ(ResultOf(*cluster->root, "tree"), UpdateOf(5));
}

}  // namespace
}  // namespace fedagg::testing
