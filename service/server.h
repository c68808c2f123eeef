// FedaggServer: one fedagg process — the gRPC server with the Aggregation, Control and
// Tier services, standard health checking and reflection, the aggregation registry and,
// with a parent address, the link that makes it an intermediate aggregator.
// fedagg-server's main() builds a ServerConfig from flags; tests start servers in-process.
#ifndef FEDAGG_SERVICE_SERVER_H_
#define FEDAGG_SERVICE_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "monitoring/metrics_registry.h"
#include "monitoring/service_metrics.h"
#include "service/core/accumulator_factory.h"
#include "service/core/ingest_window.h"
#include "service/core/large_allocation.h"
#include "service/core/measured_host_memory_pinner.h"
#include "service/core/memory_budget.h"
#include "service/core/narrowed_partial.h"
#include "service/core/thread_pool.h"
#include "service/core/read_file.h"
#include "service/http/http_api.h"
#include "service/http/http_server.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rounds/checkpointer.h"
#include "service/rpc/aggregation_service.h"
#include "service/rpc/authenticator.h"
#include "service/rpc/control_service.h"
#include "service/rpc/stall_sweeper.h"
#include "service/rpc/stream_limiter.h"
#include "service/rpc/cohort_service.h"
#include "service/rpc/tier_service.h"
#include "service/tier/parent_link.h"

namespace fedagg {

struct TlsFiles {
  std::string cert;       // PEM certificate chain presented by this side
  std::string key;        // PEM private key
  std::string ca;         // PEM roots that verify the other side
};

// ServerConfig::metrics_address that serves metrics beside the gRPC listener.
inline constexpr absl::string_view kMetricsAddressAuto = "auto";

struct ServerConfig {
  std::string listen_address = "0.0.0.0:50051";
  std::string parent_address;  // empty: this is the root (server placement)
  std::string node_id;         // name at the parent; default: the listen address
  int batch_size = 16;
  uint64_t batch_max_bytes = uint64_t{64} << 20;  // a batch is also full at this many payload bytes
  absl::Duration flush_interval = absl::Milliseconds(100);
  int retain_finished = 1000;
  // Results of finished aggregations kept, in bytes, before older ones are forgotten
  // (AggregationOptions::retain_finished_bytes); 0: no such bound.
  uint64_t retain_finished_bytes = uint64_t{1} << 30;
  // A finished aggregation is kept this long whatever the two bounds above
  // (AggregationOptions::finished_grace).
  absl::Duration finished_grace = absl::Seconds(10);
  uint64_t max_update_bytes = uint64_t{1} << 30;
  // Bytes of client data (updates in flight, pending batches, accumulators) this node
  // holds at most; a new update that would exceed it is refused. 0: no budget.
  uint64_t memory_budget_bytes = 0;
  // Update bytes (being received or waiting in pending batches) held at once: a new
  // update waits, its stream paused, until its bytes fit (an update larger than the
  // window goes alone). Batches close at half of it. 0: no window.
  uint64_t ingest_window_bytes = uint64_t{16} << 20;
  // HTTP/2 receive window of each stream: what a sender may have in flight to this node
  // beyond what it has read, so also what a paused stream buffers here. 0: gRPC's own,
  // which grows with the measured bandwidth-delay product (to several MiB a stream).
  uint64_t stream_window_bytes = uint64_t{1} << 20;
  // Contribute and Submit streams one caller identity may hold open; 0: no limit.
  int max_streams_per_identity = 0;
  // An update that receives no message for this long is discarded and its stream ended
  // with DEADLINE_EXCEEDED; zero: never.
  absl::Duration stall_timeout = absl::Seconds(60);
  absl::Duration child_grace = absl::Seconds(10);
  absl::Duration forward_interval = absl::Seconds(1);
  // Intermediate aggregators: the connection to the parent is pinged after this long
  // without traffic, and dropped when a ping is not answered within this long again, so a
  // parent that stopped answering (frozen, or cut off by the network) is noticed and its
  // Join streams end. At least kMinKeepalive.
  absl::Duration parent_keepalive = absl::Seconds(10);
  // The same for the connections this node's streams arrive on (children's Join streams,
  // clients' updates): a child cut off by a network that drops packets keeps its TCP
  // connection, and without pings its Join stream would stay up here, its claims held,
  // forever. With them the stream ends, and child_grace later the child is lost (6.3 of
  // docs/PROTOCOL.md). At least kMinKeepalive.
  absl::Duration child_keepalive = absl::Seconds(10);
  // What this node asks its children's partials in: full precision, or 16 bits for the
  // dense floating sums (service/core/narrowed_partial.h).
  PartialPrecision child_partial_precision = PartialPrecision::kFull;
  // Root only: where each aggregation's checkpoint is written (empty: no checkpoints, no
  // DURABLE acks), and how often changed aggregations are written.
  std::string checkpoint_dir;
  absl::Duration checkpoint_interval = absl::Seconds(1);
  // TLS on the listener when cert and key are set; with `ca` also set, clients must
  // present certificates signed by it (mutual TLS).
  TlsFiles tls;
  // TLS to the parent when `ca` is set; cert and key add a client certificate (mTLS).
  TlsFiles parent_tls;
  std::vector<std::string> auth_tokens;  // accepted bearer tokens; empty: no token check
  std::string parent_token;
  // host:port of the HTTP endpoint serving /metrics, /healthz and /readyz; empty: none;
  // kMetricsAddressAuto: the host of listen_address on a port the system picks (so two
  // servers on one host never clash, and metrics are not served on more interfaces than
  // gRPC is); metrics_port() tells which.
  std::string metrics_address = std::string(kMetricsAddressAuto);
  // host:port of the HTTP path of clients without gRPC streams (docs/PROTOCOL.md 4a:
  // tasks, resumable uploads, status, results, the JavaScript client); empty: none. The
  // same address as metrics_address serves both on one listener. Over TLS with `tls`.
  std::string http_address;
  // An HTTP upload no request asked about for this long is discarded (WAITING, OPEN) or
  // forgotten (its answer).
  absl::Duration upload_idle_timeout = absl::Minutes(5);
  // Requests the HTTP path serves at once (threads; each keep-alive connection holds one).
  int http_threads = 32;
  // The reduction backend (service/backend/backend_choice.h); null: the CPU backend.
  // Must outlive the server.
  const AccumulatorFactory* backend = nullptr;
};

class FedaggServer {
 public:
  // The shortest ServerConfig::parent_keepalive and child_keepalive: every fedagg server
  // accepts keepalive pings from its children this often (half of it, for timer jitter).
  static constexpr absl::Duration kMinKeepalive = absl::Seconds(1);

  static absl::StatusOr<std::unique_ptr<FedaggServer>> Start(const ServerConfig& config);
  ~FedaggServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_http_ ? metrics_http_->port() : 0; }
  // The HTTP path's port; 0 without ServerConfig::http_address.
  int http_port() const { return http_port_; }
  bool is_root() const { return parent_link_ == nullptr; }
  // Aggregations resumed from --checkpoint_dir at start.
  int restored_aggregations() const { return restored_aggregations_; }
  AggregationRegistry& registry() { return *registry_; }
  const MemoryBudget& memory_budget() const { return *memory_budget_; }
  // Null when ServerConfig::ingest_window_bytes is 0.
  const IngestWindow* ingest_window() const { return ingest_window_.get(); }
  void Wait() { server_->Wait(); }
  // Writes a last checkpoint (acks still waiting for one go out as RECEIVED), stops
  // accepting calls, cancels streams in progress after `grace`, and stops the parent
  // link: with a grace, after pushing what each open mirror counted since its last push
  // (ParentLink::ForwardBeforeStopping); with none, at once.
  void Shutdown(absl::Duration grace = absl::Seconds(1));

 private:
  FedaggServer() = default;

  // The metrics listener and the HTTP path (ServerConfig::metrics_address, http_address).
  absl::Status StartHttp(const ServerConfig& config);
  void RegisterStateGauges();
  // fedagg_gpu_memory_*: only for a backend that reduces on devices.
  void RegisterDeviceGauges(const DeviceMonitor& monitor);
  // fedagg_ingest_*: only when the server has an ingest window.
  void RegisterIngestWindowMetrics(const IngestWindow& window);
  void RegisterStagingMetrics(const std::vector<const StagingRingStats*>& rings);
  void RegisterPinningMetrics(std::shared_ptr<const MeasuredHostMemoryPinner> pinner);

  std::string backend_name_;  // for fedagg_backend_info
  const DeviceMonitor* device_monitor_ = nullptr;  // the backend's; null: host memory only

  std::unique_ptr<MetricsRegistry> metrics_registry_ = std::make_unique<MetricsRegistry>();
  std::unique_ptr<ServiceMetrics> metrics_ = std::make_unique<ServiceMetrics>(*metrics_registry_);
  // Declared before everything that holds reservations or slots in them.
  std::unique_ptr<MemoryBudget> memory_budget_;
  // The backend's pinning of received updates' memory (cuda), counted for the metrics,
  // for the server's life: declared before everything that holds update buffers.
  std::shared_ptr<const MeasuredHostMemoryPinner> host_pinner_;  // null: the backend pins nothing
  ReleasedMappings released_mappings_;
  MemoryReservation staging_reservation_;  // the backend's staging slots, for the server's life
  // Declared before registry_: the update buffers of its aggregations hold tickets in it.
  std::unique_ptr<IngestWindow> ingest_window_;
  std::vector<const StagingRingStats*> staging_rings_;
  // Where aggregations reduce their batches and finalize. Declared before registry_ and
  // server_, after ingest_window_: destroyed once no aggregation and no call is left, it
  // runs what is still queued (reductions, whose updates hold tickets in the window, and
  // finalizations), then joins its threads.
  std::unique_ptr<ThreadPool> reduction_workers_;
  std::unique_ptr<StreamLimiter> stream_limiter_;
  // Declared before registry_, so destroyed after it: the registry's ticker may tell the
  // checkpointer about forgotten aggregations until the registry is gone.
  std::unique_ptr<Checkpointer> checkpointer_;
  int restored_aggregations_ = 0;
  std::unique_ptr<AggregationRegistry> registry_;
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<ServiceContext> context_;
  // Checks the streams' stall watches; declared before the services and server_, whose
  // reactors hold watches, so destroyed after them.
  std::unique_ptr<StallSweeper> stall_sweeper_;
  std::unique_ptr<AggregationService> aggregation_service_;
  std::unique_ptr<ControlService> control_service_;
  std::unique_ptr<TierService> tier_service_;
  std::unique_ptr<CohortService> cohort_service_;
  std::unique_ptr<ParentLink> parent_link_;
  std::unique_ptr<grpc::Server> server_;
  // The HTTP path; declared before the listeners, whose handlers use it.
  std::unique_ptr<HttpApi> http_api_;
  // The metrics listener (with the HTTP path when both share an address), and the HTTP
  // path's own listener otherwise.
  std::unique_ptr<HttpServer> metrics_http_;
  std::unique_ptr<HttpServer> api_http_;
  int port_ = 0;
  int http_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SERVER_H_
