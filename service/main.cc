// fedagg-server: the aggregation service. Without --parent it is the root (the server
// placement); with --parent it is an intermediate aggregator. Its flags live in
// service/flags/, one file per concern; every flag can also come from a file:
// --flagfile=/etc/fedagg/server.flags (one --flag=value per line).
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "service/flags/server_flags.h"
#include "service/server.h"

namespace {

std::atomic<bool> g_stop{false};

// Exit status 2: the command line asks for something this node cannot do.
int Refuse(const absl::Status& status) {
  std::fprintf(stderr, "fedagg-server: %s\n", std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage(
      "the aggregation tier for federated computation.\n"
      "  root:          fedagg-server --listen=0.0.0.0:50051\n"
      "  intermediate:  fedagg-server --listen=0.0.0.0:50052 --parent=root-host:50051");
  fedagg::ParseProgramCommandLine(argc, argv);
  // Before any thread starts: threads are given their arena at their first allocation.
  absl::StatusOr<int> heap_arenas = fedagg::HeapArenasFlag();
  if (!heap_arenas.ok()) return Refuse(heap_arenas.status());
  if (*heap_arenas > 0) mallopt(M_ARENA_MAX, *heap_arenas);

  absl::StatusOr<fedagg::BackendChoice> backend = fedagg::ChooseBackendFromFlags();
  if (!backend.ok()) return Refuse(backend.status());
  std::printf("fedagg-server: reduction backend %s\n", backend->reason.c_str());
  // OpenMP reads its wait policy once, when its library loads: only the environment can set it.
  const char* omp_wait_policy = std::getenv("OMP_WAIT_POLICY");
  if (backend->backend->name() == "thrust-omp" &&
      (omp_wait_policy == nullptr || !absl::EqualsIgnoreCase(omp_wait_policy, "passive"))) {
    std::printf("fedagg-server: thrust-omp: OpenMP's threads spin between reductions on the cores gRPC receives on; "
                "start the server with OMP_WAIT_POLICY=passive (docs/OPERATIONS.md)\n");
  }

  fedagg::ServerConfig config;
  config.backend = backend->backend;
  std::string ingest_window_reason;
  for (absl::Status status : {fedagg::ApplyNetworkFlags(config), fedagg::ApplyIngestFlags(config, &ingest_window_reason),
                              fedagg::ApplyTreeFlags(config)}) {
    if (!status.ok()) return Refuse(status);
  }
  std::printf("fedagg-server: ingest window %llu MiB (%s)\n",
              static_cast<unsigned long long>(config.ingest_window_bytes >> 20), ingest_window_reason.c_str());

  absl::StatusOr<std::unique_ptr<fedagg::FedaggServer>> server = fedagg::FedaggServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "fedagg-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!config.checkpoint_dir.empty()) {
    std::printf("fedagg-server checkpoints in %s every %s; resumed %d aggregations from it\n",
                config.checkpoint_dir.c_str(), absl::FormatDuration(config.checkpoint_interval).c_str(),
                (*server)->restored_aggregations());
  }
  if ((*server)->metrics_port() != 0) {
    std::printf("fedagg-server metrics on port %d (--metrics_address=%s): /metrics, /healthz, /readyz\n",
                (*server)->metrics_port(), config.metrics_address.c_str());
  }
  if ((*server)->http_port() != 0) {
    std::printf("fedagg-server HTTP path on port %d (--http_address=%s): /v1/tasks, /v1/uploads, /fedagg.mjs, "
                "/examples/logistic-regression/\n",
                (*server)->http_port(), config.http_address.c_str());
  }
  std::printf("fedagg-server listening on port %d as %s (backend: %s)\n", (*server)->port(),
              config.parent_address.empty() ? "root" : ("intermediate under " + config.parent_address).c_str(),
              std::string(backend->backend->name()).c_str());
  std::fflush(stdout);

  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::printf("fedagg-server: shutting down\n");
  (*server)->Shutdown(absl::Seconds(2));
  return 0;
}
