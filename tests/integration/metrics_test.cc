// The /metrics, /healthz and /readyz endpoint of a live server: the counters move with
// real traffic, the queue-depth gauges show updates pending and in flight, the counted
// ids' memory shows and is freed, the GPU gauges show what the backend's DeviceMonitor
// reads (a fake one here: no GPU is needed) and are absent with the CPU backend, the
// pinning of received updates is counted when the backend pins (a fake pinner), and the
// exposition passes `promtool check metrics` (Prometheus's own linter).

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include <unistd.h>

#include "service/core/cpu_accumulator_factory.h"
#include "service/core/mutex.h"
#include "tests/integration/raw_streams.h"
#include "tests/integration/http_get.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

// The body of GET /metrics ("" when the answer is not 200).
std::string Scrape(int port) {
  const std::string response = HttpGet(port, "/metrics");
  if (response.rfind("HTTP/1.1 200 OK", 0) != 0) return "";
  return response.substr(response.find("\r\n\r\n") + 4);
}

// `promtool check metrics` on an exposition: its output and whether it passed; nullopt
// when promtool is not installed.
struct Lint {
  bool passed = false;
  std::string output;
};
std::optional<Lint> PromtoolCheck(const std::string& body) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  // One file per process: ctest runs this suite's cases as processes side by side, and a
  // shared name let one case lint another's half-written exposition.
  const std::string path = ::testing::TempDir() + "/fedagg-metrics-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << body;
  const std::string command = "promtool check metrics < " + path + " > " + path + ".lint 2>&1";
  const bool passed = std::system(command.c_str()) == 0;
  return Lint{passed, ReadFile(path + ".lint").value_or("")};
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
  EXPECT_TRUE(HasLine(body, "# TYPE fedagg_pending_updates gauge")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_in_flight 0")) << body;
  // The CPU backend reduces in host memory: no device metric at all.
  EXPECT_TRUE(HasLine(body, "fedagg_backend_info{backend=\"cpu\"} 1")) << body;
  EXPECT_EQ(body.find("fedagg_gpu_"), std::string::npos) << body;
  EXPECT_EQ(body.find("fedagg_host_pin"), std::string::npos) << body;  // nor pins host memory

  // Prometheus's linter on the live exposition.
  const std::optional<Lint> lint = PromtoolCheck(body);
  if (!lint.has_value()) GTEST_SKIP() << "promtool not installed (scripts/setup.sh installs the 'prometheus' package)";
  EXPECT_TRUE(lint->passed) << lint->output;
}

TEST(MetricsTest, QueueDepthAndCountedIdMemoryAreGauges) {
  ServerConfig config = LoopbackConfig();
  config.batch_size = 100;                     // no batch fills up
  config.flush_interval = absl::Hours(1);      // and none is reduced for waiting
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int port = cluster->root->port();
  const int metrics_port = cluster->root->metrics_port();
  ControlClient control(Connect(port));
  const v1::AggregationSpec spec = MakeSpec("q", {{"w", "float32[4]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(spec).ok());
  const std::vector<float> values = {1, 2, 3, 4};
  const UpdateView update{{FieldValue::Dense<float>(values)}, std::nullopt};
  for (const char* client : {"a", "b", "c"}) {
    auto stream = ContributeStream::Open(Connect(port), client);
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_TRUE((*stream)->Contribute(spec, update).ok());
  }
  std::string body = Scrape(metrics_port);
  EXPECT_TRUE(HasLine(body, "fedagg_pending_updates 3")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_in_flight 0")) << body;
  // The three counted ids are held (a block and a table, whatever their few bytes).
  const size_t ids_line = body.find("\nfedagg_counted_client_id_bytes ");
  ASSERT_NE(ids_line, std::string::npos) << body;
  EXPECT_GT(std::stod(body.substr(body.find(' ', ids_line + 1) + 1)), 0) << body;

  // A fourth client sends its header and holds the update open: it is in flight.
  RawContributeStream open_update(port, "d");
  ASSERT_TRUE(open_update.open());
  ASSERT_TRUE(open_update.Write(HeaderRequest("q", 1)));
  EXPECT_TRUE(Eventually([&] { return HasLine(body = Scrape(metrics_port), "fedagg_updates_in_flight 1"); }))
      << body;
  EXPECT_TRUE(HasLine(body, "fedagg_pending_updates 3")) << body;
  // It gives up: discarded, no longer in flight, and nothing new is pending.
  EXPECT_TRUE(open_update.Close().ok());
  EXPECT_TRUE(Eventually([&] { return HasLine(body = Scrape(metrics_port), "fedagg_updates_in_flight 0"); }))
      << body;
  EXPECT_TRUE(HasLine(body, "fedagg_pending_updates 3")) << body;

  // Finalization reduces the pending batch: the queue is empty.
  ASSERT_TRUE(control.Seal("q").ok());
  absl::StatusOr<v1::AggregationStatus> final_status = control.WatchUntilFinal("q");
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  EXPECT_EQ(final_status->state(), v1::FINALIZED);
  EXPECT_EQ(final_status->contributions(), 3);
  body = Scrape(metrics_port);
  EXPECT_TRUE(HasLine(body, "fedagg_pending_updates 0")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_in_flight 0")) << body;
  // Finished, without checkpoints: its counted ids are freed with its accumulators.
  EXPECT_TRUE(Eventually([&] { return HasLine(body = Scrape(metrics_port), "fedagg_counted_client_id_bytes 0"); }))
      << body;
}

// A DeviceMonitor whose readings the test sets.
class FakeDeviceMonitor final : public DeviceMonitor {
 public:
  absl::StatusOr<std::vector<DeviceMemoryReading>> ReadMemory() const override {
    MutexLock lock(&mu_);
    return readings_;
  }
  void Set(absl::StatusOr<std::vector<DeviceMemoryReading>> readings) {
    MutexLock lock(&mu_);
    readings_ = std::move(readings);
  }

 private:
  mutable Mutex mu_;
  absl::StatusOr<std::vector<DeviceMemoryReading>> readings_ ABSL_GUARDED_BY(mu_);
};

// Reduces like the CPU backend and reports the fake monitor's devices.
class FakeDeviceBackend final : public AccumulatorFactory {
 public:
  absl::string_view name() const override { return "fake-device"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override {
    return CpuAccumulatorFactory::Default().Make(field);
  }
  const DeviceMonitor* device_monitor() const override { return &monitor; }

  FakeDeviceMonitor monitor;
};

TEST(MetricsTest, GpuMemoryGaugesReadTheBackendsDevicesAtScrapeTime) {
  FakeDeviceBackend backend;
  backend.monitor.Set(std::vector<DeviceMemoryReading>{{0, 1000, 4000}, {1, 2500, 8000}});
  ServerConfig config = LoopbackConfig();
  config.backend = &backend;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int metrics_port = cluster->root->metrics_port();

  std::string body = Scrape(metrics_port);
  EXPECT_TRUE(HasLine(body, "fedagg_backend_info{backend=\"fake-device\"} 1")) << body;
  EXPECT_TRUE(HasLine(body, "# TYPE fedagg_gpu_memory_used_bytes gauge")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_gpu_memory_used_bytes{device=\"0\"} 1000")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_gpu_memory_used_bytes{device=\"1\"} 2500")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_gpu_memory_total_bytes{device=\"0\"} 4000")) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_gpu_memory_total_bytes{device=\"1\"} 8000")) << body;
  if (const std::optional<Lint> lint = PromtoolCheck(body); lint.has_value()) {
    EXPECT_TRUE(lint->passed) << lint->output;
  }

  // Each scrape reads afresh.
  backend.monitor.Set(std::vector<DeviceMemoryReading>{{0, 3000, 4000}});
  body = Scrape(metrics_port);
  EXPECT_TRUE(HasLine(body, "fedagg_gpu_memory_used_bytes{device=\"0\"} 3000")) << body;
  EXPECT_EQ(body.find("fedagg_gpu_memory_used_bytes{device=\"1\"}"), std::string::npos) << body;

  // A device that cannot be read: no value rather than a stale one.
  backend.monitor.Set(absl::UnavailableError("the device fell off the bus"));
  body = Scrape(metrics_port);
  EXPECT_TRUE(HasLine(body, "# TYPE fedagg_gpu_memory_used_bytes gauge")) << body;
  EXPECT_EQ(body.find("fedagg_gpu_memory_used_bytes{"), std::string::npos) << body;
  EXPECT_EQ(body.find("fedagg_gpu_memory_total_bytes{"), std::string::npos) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_updates_in_flight 0")) << body;  // the rest is served as usual
}

// Reduces like the CPU backend and "pins" the memory updates are received into.
class FakePinningBackend final : public AccumulatorFactory {
 public:
  absl::string_view name() const override { return "fake-pinning"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override {
    return CpuAccumulatorFactory::Default().Make(field);
  }
  std::shared_ptr<HostMemoryPinner> host_memory_pinner() const override { return pinner_; }

 private:
  class AlwaysPins final : public HostMemoryPinner {
   public:
    bool Pin(void*, size_t) override { return true; }
    void Unpin(void*, size_t) override {}
  };
  const std::shared_ptr<HostMemoryPinner> pinner_ = std::make_shared<AlwaysPins>();
};

TEST(MetricsTest, PinningOfReceivedUpdatesIsCounted) {
  FakePinningBackend backend;
  ServerConfig config = LoopbackConfig();
  config.backend = &backend;
  auto cluster = Cluster::Start(0, config);
  ASSERT_NE(cluster, nullptr);
  const int metrics_port = cluster->root->metrics_port();
  EXPECT_EQ(MetricSample(metrics_port, "fedagg_host_pins_total"), 0.0);
  EXPECT_EQ(MetricSample(metrics_port, "fedagg_pinned_host_bytes"), 0.0);

  // A 1 MiB update is received into its own mapping, pinned once.
  ControlClient control(Connect(cluster->root->port()));
  const v1::AggregationSpec spec = MakeSpec("p", {{"w", "float32[262144]", Intrinsic::kFederatedSum}});
  ASSERT_TRUE(control.Create(spec).ok());
  auto stream = ContributeStream::Open(Connect(cluster->root->port()), "client");
  ASSERT_TRUE(stream.ok());
  const std::vector<float> values(262144, 0.5f);
  ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<float>(values)}, std::nullopt}).ok());
  const std::string body = Scrape(metrics_port);
  EXPECT_GE(MetricSample(metrics_port, "fedagg_host_pins_total").value_or(0), 1.0) << body;
  EXPECT_GE(MetricSample(metrics_port, "fedagg_pinned_host_bytes").value_or(0), 262144.0 * 4) << body;
  EXPECT_TRUE(HasLine(body, "fedagg_host_pin_failures_total 0")) << body;
  // The update's buffer, in use or kept for the next update of its size.
  EXPECT_GE(MetricSample(metrics_port, "fedagg_update_buffer_bytes{state=\"in_use\"}").value_or(0) +
                MetricSample(metrics_port, "fedagg_update_buffer_bytes{state=\"kept\"}").value_or(0),
            262144.0 * 4)
      << body;
  EXPECT_TRUE(HasLine(body, "# TYPE fedagg_host_pin_seconds_total counter")) << body;
  if (const std::optional<Lint> lint = PromtoolCheck(body); lint.has_value()) {
    EXPECT_TRUE(lint->passed) << lint->output;
  }
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
