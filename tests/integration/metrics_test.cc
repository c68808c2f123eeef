// The /metrics, /healthz and /readyz endpoint of a live server: the counters move with
// real traffic, the exposition passes `promtool check metrics` (Prometheus's own linter).
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tests/integration/http_get.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsTest, CountersFollowTrafficAndTheExpositionLints) {
  auto cluster = Cluster::Start(0);
  ASSERT_NE(cluster, nullptr);
  const int metrics_port = cluster->root->metrics_port();
  ASSERT_GT(metrics_port, 0);
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("m", {{"w", "float32[4]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(spec).ok());
  auto stream = ContributeStream::Open(Connect(cluster->root->port()), "client");
  ASSERT_TRUE(stream.ok());
  const std::vector<float> values = {1, 2, 3, 4};
  const UpdateView update{{FieldValue::Dense<float>(values)}, std::nullopt};
  ASSERT_TRUE((*stream)->Contribute(spec, update).ok());
  EXPECT_EQ((*stream)->ContributeUnchecked("missing", update).status().code(), absl::StatusCode::kNotFound);

  const std::string response = HttpGet(metrics_port, "/metrics");
  ASSERT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);
  EXPECT_TRUE(HasLine(body, "fedagg_updates_received_total 2")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_accepted_total 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_rejected_total{reason=\"NOT_FOUND\"} 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_payload_bytes_total 16")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_active_streams 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_aggregations{state=\"OPEN\"} 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_aggregation_contributions{aggregation=\"m\"} 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_update_latency_seconds_count 1")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_update_latency_seconds_bucket{le=\"+Inf\"} 1")) << body;
  EXPECT_TRUE(HasLine(body, "# TYPE fedagg_update_latency_seconds histogram")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_memory_budget_bytes 0")) << body;
  EXPECT_NE(body.find("\nfedagg_memory_accounted_bytes "), std::string::npos) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_stalled_updates_evicted_total 0")) << body;

  // Prometheus's linter on the live exposition.
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/setup.sh installs the 'prometheus' package)";
  }
  const std::string path = ::testing::TempDir() + "/fedagg-metrics.txt";
  std::ofstream(path) << body;
  const std::string command = "promtool check metrics < " + path + " > " + path + ".lint 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << ReadFile(path + ".lint").value_or("");
}

TEST(MetricsTest, HealthReadinessAndUnknownPaths) {
  auto cluster = Cluster::Start(1);
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(HttpGet(cluster->root->metrics_port(), "/healthz").rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(HttpGet(cluster->root->metrics_port(), "/readyz").rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(HttpGet(cluster->root->metrics_port(), "/nope").rfind("HTTP/1.1 404", 0), 0u);
  // The intermediate is ready once it has reached its parent (it polls every 200 ms).
  const int intermediate = cluster->intermediates[0]->metrics_port();
  std::string ready;
  for (int i = 0; i < 50; ++i) {
    ready = HttpGet(intermediate, "/readyz");
    if (ready.rfind("HTTP/1.1 200", 0) == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(ready.rfind("HTTP/1.1 200 OK", 0), 0u) << ready;
  // Without its parent it stops being ready.
  cluster->root->Shutdown(absl::ZeroDuration());
  for (int i = 0; i < 50; ++i) {
    ready = HttpGet(intermediate, "/readyz");
    if (ready.rfind("HTTP/1.1 503", 0) == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(ready.rfind("HTTP/1.1 503", 0), 0u) << ready;
}

}  // namespace
}  // namespace fedagg::testing
