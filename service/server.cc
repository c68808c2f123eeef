// FedaggServer: assembles services, credentials, registry and parent link.
#include "service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>


#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/rpc/malformed_request_interceptor.h"
#include "service/rpc/service_context.h"

namespace fedagg {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsFiles& tls) {
  if (tls.cert.empty() && tls.key.empty()) {
    if (!tls.ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key: client certificates are checked only over TLS");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls_cert and --tls_key");
  }
  grpc::SslServerCredentialsOptions options(
      tls.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  FEDAGG_ASSIGN_OR_RETURN(std::string cert, ReadFile(tls.cert));
  FEDAGG_ASSIGN_OR_RETURN(std::string key, ReadFile(tls.key));
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!tls.ca.empty()) {
    FEDAGG_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(tls.ca));
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(const TlsFiles& tls) {
  if (tls.ca.empty()) {
    if (!tls.cert.empty()) {
      return absl::InvalidArgumentError("a client certificate for the parent needs --parent_tls_ca too");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  FEDAGG_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(tls.ca));
  if (!tls.cert.empty()) {
    FEDAGG_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadFile(tls.cert));
    FEDAGG_ASSIGN_OR_RETURN(options.pem_private_key, ReadFile(tls.key));
  }
  return grpc::SslCredentials(options);
}

// The address the HTTP endpoint listens on: ServerConfig::metrics_address, with
// kMetricsAddressAuto resolved to the host of the gRPC listener and port 0 (a free port).
std::string MetricsAddress(const ServerConfig& config) {
  if (config.metrics_address != kMetricsAddressAuto) return config.metrics_address;
  const size_t colon = config.listen_address.rfind(':');
  return absl::StrCat(colon == std::string::npos ? "" : config.listen_address.substr(0, colon), ":0");
}

}  // namespace

absl::StatusOr<std::unique_ptr<FedaggServer>> FedaggServer::Start(const ServerConfig& config) {
  if (config.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (config.batch_max_bytes < 1) return absl::InvalidArgumentError("--batch_max_mib must be >= 1");
  std::unique_ptr<FedaggServer> server(new FedaggServer());
  AggregationOptions options;
  options.batching.batch_size = config.batch_size;
  // A pending batch never holds the whole ingest window: it closes at half of it, so an
  // update of half the window or more is reduced as it arrives.
  options.batching.batch_max_bytes = config.ingest_window_bytes == 0
                                ? config.batch_max_bytes
                                : std::min(config.batch_max_bytes, std::max<uint64_t>(config.ingest_window_bytes / 2, 1));
  options.flush_interval = config.flush_interval;
  options.retain_finished = config.retain_finished;
  options.retain_finished_bytes = config.retain_finished_bytes;
  options.finished_grace = config.finished_grace;
  server->memory_budget_ = std::make_unique<MemoryBudget>(config.memory_budget_bytes);
  options.batching.memory_budget = server->memory_budget_.get();
  // Released update buffers are kept for the next updates, as many bytes as the window
  // admits at once (kept and in-use buffers together: service/core/large_allocation.h);
  // with a backend whose copies read host memory at full speed only when it is pinned,
  // they are mappings pinned once.
  std::shared_ptr<HostMemoryPinner> pinner = config.backend != nullptr ? config.backend->host_memory_pinner() : nullptr;
  if (pinner != nullptr) {
    auto measured = std::make_shared<MeasuredHostMemoryPinner>(std::move(pinner));
    server->host_pinner_ = measured;
    pinner = std::move(measured);
  }
  server->released_mappings_ = ReleasedMappings(std::move(pinner), config.ingest_window_bytes);
  if (config.backend != nullptr) {
    // The staging rings' slots may all be allocated at once: the budget holds them first.
    uint64_t staging_bytes = 0;
    for (const StagingRingStats* ring : config.backend->staging_rings()) {
      staging_bytes += static_cast<uint64_t>(ring->slots()) * ring->slot_bytes();
    }
    FEDAGG_ASSIGN_OR_RETURN(server->staging_reservation_,
                            server->memory_budget_->Reserve(
                                staging_bytes, absl::StrCat("the staging slots of the ", config.backend->name(),
                                                            " backend (--staging_slots x --staging_slot_mib)")));
  }
  if (config.max_streams_per_identity < 0) return absl::InvalidArgumentError("--max_streams_per_identity must be >= 0");
  server->stream_limiter_ = std::make_unique<StreamLimiter>(config.max_streams_per_identity);
  ServiceMetrics* metrics = server->metrics_.get();
  options.batching.on_batch_reduced = [metrics](absl::Duration elapsed, size_t updates) {
    metrics->batch_reduction.Observe(absl::ToDoubleSeconds(elapsed));
    metrics->batch_fill.Observe(static_cast<double>(updates));
  };
  server->reduction_workers_ = std::make_unique<ThreadPool>(1 + BatchReducer::DefaultWorkerThreads());
  options.batching.workers = server->reduction_workers_.get();
  // Finalizations run there too: reading a large result back is a reduction's kind of
  // work, and no RPC thread waits for it.
  options.finalizer = server->reduction_workers_.get();
  options.child_grace = config.child_grace;
  options.backend = config.backend;
  server->backend_name_ = std::string(config.backend != nullptr ? config.backend->name() : "cpu");
  server->device_monitor_ = config.backend != nullptr ? config.backend->device_monitor() : nullptr;
  if (config.backend != nullptr) server->staging_rings_ = config.backend->staging_rings();
  if (!config.checkpoint_dir.empty() && !config.parent_address.empty()) {
    return absl::InvalidArgumentError(
        "--checkpoint_dir is for the root: an intermediate aggregator writes no checkpoints (its "
        "parent keeps what it forwards, and a restarted intermediate joins as a new child)");
  }
  if (config.child_keepalive < kMinKeepalive) {
    return absl::InvalidArgumentError(absl::StrCat("--child_keepalive_ms must be at least ",
                                                   absl::ToInt64Milliseconds(kMinKeepalive)));
  }
  options.checkpointed = !config.checkpoint_dir.empty();
  server->registry_ = std::make_unique<AggregationRegistry>(options);
  if (!config.checkpoint_dir.empty()) {
    CheckpointerOptions checkpoints{config.checkpoint_dir, config.checkpoint_interval};
    checkpoints.on_written = [metrics](absl::Duration elapsed, bool ok) {
      metrics->checkpoint_writes.WithLabels({ok ? "ok" : "failed"}).Increment();
      metrics->checkpoint_write.Observe(absl::ToDoubleSeconds(elapsed));
    };
    FEDAGG_ASSIGN_OR_RETURN(server->checkpointer_,
                            Checkpointer::Open(std::move(checkpoints), *server->registry_));
    // Before serving: every aggregation is back before the first call can ask for it.
    FEDAGG_ASSIGN_OR_RETURN(server->restored_aggregations_, server->checkpointer_->RestoreAll());
    server->registry_->SetStore(server->checkpointer_.get());
    server->checkpointer_->Start();
  }
  server->authenticator_ = std::make_unique<Authenticator>(config.auth_tokens);
  server->context_ = std::make_unique<ServiceContext>(
      ServiceContext{*server->registry_, *server->authenticator_, *server->metrics_, config.max_update_bytes});
  server->context_->memory_budget = server->memory_budget_.get();
  server->context_->child_partial_precision = config.child_partial_precision;
  if (config.ingest_window_bytes > 0) {
    server->ingest_window_ = std::make_unique<IngestWindow>(config.ingest_window_bytes);
    AggregationRegistry* registry = server->registry_.get();
    server->ingest_window_->SetPressureHandler([registry] {
      for (const std::shared_ptr<Aggregation>& aggregation : registry->List()) aggregation->FlushPending();
    });
    server->context_->ingest_window = server->ingest_window_.get();
  }
  server->context_->stream_limiter = server->stream_limiter_.get();
  server->stall_sweeper_ = std::make_unique<StallSweeper>(config.stall_timeout);
  server->context_->stall_sweeper = server->stall_sweeper_.get();
  server->aggregation_service_ = std::make_unique<AggregationService>(*server->context_);
  server->control_service_ = std::make_unique<ControlService>(*server->context_);
  server->tier_service_ = std::make_unique<TierService>(*server->context_);
  server->cohort_service_ = std::make_unique<CohortService>(*server->context_);

  FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          ServerCredentials(config.tls));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen_address, credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxReceivedMessageBytes));
  // Without SO_REUSEPORT (gRPC sets it by default) a second server started on a port in
  // use fails instead of sharing it: two processes on one port would split the clients
  // between two unrelated aggregation states.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Children ping their parent while a Join stream is idle (ServerConfig::parent_keepalive);
  // gRPC's default answers pings more often than every 5 minutes with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(kMinKeepalive / 2)));
  // And this node pings the connections its streams arrive on (ServerConfig::child_keepalive),
  // idle Join streams included, which send no data.
  const int child_keepalive_ms = static_cast<int>(absl::ToInt64Milliseconds(config.child_keepalive));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, child_keepalive_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, child_keepalive_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (config.stream_window_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               static_cast<int>(std::min<uint64_t>(config.stream_window_bytes, INT32_MAX)));
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>(AggregationService::kRawMethods));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(server->aggregation_service_.get());
  builder.RegisterService(server->control_service_.get());
  builder.RegisterService(server->tier_service_.get());
  builder.RegisterService(server->cohort_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", config.listen_address,
                                               "' (address in use, or not an address of this host?)"));
  }
  if (!config.parent_address.empty()) {
    FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> parent_credentials,
                            ChannelCredentials(config.parent_tls));
    ParentLinkOptions link;
    link.metrics = server->metrics_.get();
    link.memory_budget = server->memory_budget_.get();
    if (config.parent_keepalive < kMinKeepalive) {
      return absl::InvalidArgumentError(absl::StrCat("--parent_keepalive_ms must be at least ",
                                                     absl::ToInt64Milliseconds(kMinKeepalive)));
    }
    grpc::ChannelArguments channel_args;
    channel_args.SetMaxReceiveMessageSize(-1);  // listings of many aggregations may be large
    // A parent that stops answering keeps its TCP connection open (a frozen process, a
    // network that drops packets): without pings the Join streams would stay up and this
    // node would go on acknowledging updates it cannot forward.
    const int keepalive_ms = static_cast<int>(absl::ToInt64Milliseconds(config.parent_keepalive));
    channel_args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
    channel_args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
    channel_args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // an idle Join stream sends no data
    link.channel = grpc::CreateCustomChannel(config.parent_address, parent_credentials, channel_args);
    link.token = config.parent_token;
    // The incarnation suffix makes a restarted node a new child at the parent: its
    // sequence numbers start again at 1 without colliding with its previous life's.
    link.child_id = absl::StrCat(
        config.node_id.empty() ? absl::StrCat(config.listen_address, "#", server->port_) : config.node_id,
        "@", absl::ToUnixNanos(absl::Now()));
    link.forward_interval = config.forward_interval;
    link.child_grace = config.child_grace;
    server->parent_link_ = std::make_unique<ParentLink>(link, *server->registry_);
    server->registry_->SetUpstream(server->parent_link_.get());
  }
  server->RegisterStateGauges();
  FEDAGG_RETURN_IF_ERROR(server->StartHttp(config));
  return server;
}

absl::Status FedaggServer::StartHttp(const ServerConfig& config) {
  const std::string metrics_address = config.metrics_address.empty() ? "" : MetricsAddress(config);
  const bool shared = !config.http_address.empty() && config.http_address == metrics_address;
  HttpServerOptions api_options;
  api_options.threads = config.http_threads;
  api_options.tls_cert = config.tls.cert;
  api_options.tls_key = config.tls.key;
  api_options.tls_client_ca = config.tls.ca;
  if (!config.http_address.empty()) {
    if (config.upload_idle_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--upload_idle_timeout must be positive");
    }
    UploadStore::Options uploads;
    uploads.idle_timeout = config.upload_idle_timeout;
    http_api_ = std::make_unique<HttpApi>(*context_, uploads);
    const HttpApi* api = http_api_.get();
    metrics_registry_->AddGaugeCallback("fedagg_http_uploads", "Uploads of the HTTP path held (every state).", {},
                                        [api] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(api->uploads().size())}}; });
  }
  if (!metrics_address.empty()) {
    HttpServerOptions options;
    if (shared) options = api_options;  // one listener: the HTTP path's TLS
    FEDAGG_ASSIGN_OR_RETURN(metrics_http_, HttpServer::Create(options));
    httplib::Server& routes = metrics_http_->routes();
    routes.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(metrics_registry_->Exposition(), "text/plain; version=0.0.4; charset=utf-8");
    });
    routes.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("ok\n", "text/plain; charset=utf-8");
    });
    routes.Get("/readyz", [this](const httplib::Request&, httplib::Response& response) {
      // An intermediate aggregator is ready once it reaches its parent.
      if (parent_link_ != nullptr && !parent_link_->parent_reachable()) {
        response.status = 503;
        response.set_content("parent aggregator not reachable\n", "text/plain; charset=utf-8");
        return;
      }
      response.set_content("ready\n", "text/plain; charset=utf-8");
    });
    if (shared) http_api_->Register(routes);
    if (absl::Status listening = metrics_http_->Listen(metrics_address, "metrics"); !listening.ok()) {
      return absl::Status(listening.code(),
                          absl::StrCat(listening.message(),
                                       "; give each server on a host its own --metrics_address port, leave it "
                                       "at 'auto' (the --listen host, a free port) or set it empty to serve no "
                                       "metrics"));
    }
  }
  if (http_api_ != nullptr && !shared) {
    FEDAGG_ASSIGN_OR_RETURN(api_http_, HttpServer::Create(api_options));
    http_api_->Register(api_http_->routes());
    if (absl::Status listening = api_http_->Listen(config.http_address, "the HTTP path"); !listening.ok()) {
      return absl::Status(listening.code(), absl::StrCat(listening.message(),
                                                         "; give each server on a host its own --http_address port"));
    }
  }
  if (http_api_ != nullptr) http_port_ = shared ? metrics_http_->port() : api_http_->port();
  return absl::OkStatus();
}

void FedaggServer::RegisterStateGauges() {
  AggregationRegistry* registry = registry_.get();
  metrics_registry_->AddGaugeCallback(
      "fedagg_aggregations", "Aggregations held by this node, by state.", {"state"}, [registry] {
        std::map<std::string, double> by_state;
        for (int state = v1::OPEN; state <= v1::CANCELLED; ++state) {
          by_state[v1::AggregationState_Name(static_cast<v1::AggregationState>(state))] = 0;
        }
        for (const auto& aggregation : registry->List()) {
          by_state[v1::AggregationState_Name(aggregation->state())] += 1;
        }
        MetricsRegistry::GaugeSamples samples;
        for (const auto& [state, count] : by_state) samples.push_back({{state}, count});
        return samples;
      });
  metrics_registry_->AddGaugeCallback(
      "fedagg_aggregation_contributions", "Contributions counted so far by each open aggregation.",
      {"aggregation"}, [registry] {
        MetricsRegistry::GaugeSamples samples;
        for (const auto& aggregation : registry->List()) {
          const v1::AggregationStatus status = aggregation->Status();
          if (status.state() == v1::OPEN || status.state() == v1::SEALED) {
            samples.push_back({{aggregation->id()}, static_cast<double>(status.contributions())});
          }
        }
        return samples;
      });
  // Quorum and deadline of each open aggregation, for the "quorum at risk" alert.
  metrics_registry_->AddGaugeCallback(
      "fedagg_aggregation_min_contributions", "Quorum (min_contributions) of each OPEN aggregation.",
      {"aggregation"}, [registry] {
        MetricsRegistry::GaugeSamples samples;
        for (const auto& aggregation : registry->List()) {
          if (aggregation->state() == v1::OPEN) {
            samples.push_back({{aggregation->id()}, static_cast<double>(aggregation->config().min_contributions)});
          }
        }
        return samples;
      });
  metrics_registry_->AddGaugeCallback(
      "fedagg_aggregation_deadline_timestamp_seconds",
      "Deadline of each OPEN aggregation that has one, as a Unix time.", {"aggregation"}, [registry] {
        MetricsRegistry::GaugeSamples samples;
        for (const auto& aggregation : registry->List()) {
          const absl::Time deadline = aggregation->config().deadline;
          if (aggregation->state() == v1::OPEN && deadline != absl::InfiniteFuture()) {
            samples.push_back({{aggregation->id()}, absl::ToDoubleSeconds(deadline - absl::UnixEpoch())});
          }
        }
        return samples;
      });
  // Queue depth, as node totals over every aggregation held (one series per node):
  // what waits for reduction, and what is being received.
  const auto node_total = [registry](int64_t (Aggregation::*count)() const) {
    return [registry, count] {
      int64_t total = 0;
      for (const auto& aggregation : registry->List()) total += ((*aggregation).*count)();
      return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(total)}};
    };
  };
  metrics_registry_->AddGaugeCallback(
      "fedagg_pending_updates",
      "Updates validated and counted, waiting in pending batches to be reduced (all aggregations).", {},
      node_total(&Aggregation::pending_updates));
  metrics_registry_->AddGaugeCallback(
      "fedagg_updates_in_flight",
      "Updates whose header was accepted and that are not yet counted or discarded (all aggregations).", {},
      node_total(&Aggregation::updates_in_flight));
  metrics_registry_->AddGaugeCallback(
      "fedagg_counted_client_id_bytes",
      "Memory of the client ids counted by the aggregations held (exactly-once's sets; at the root, "
      "every client of the tree); an aggregation frees its set when it finishes.",
      {}, node_total(&Aggregation::counted_client_id_bytes));
  metrics_registry_->AddGaugeCallback(
      "fedagg_update_buffer_bytes",
      "Host memory of the process's mapped buffers of 64 KiB and more (received updates, reduction "
      "working buffers): in use, and released but kept for the next updates.",
      {"state"}, [] {
        const LargeAllocation::MappedBytes mapped = LargeAllocation::Mapped();
        return MetricsRegistry::GaugeSamples{{{"in_use"}, static_cast<double>(mapped.in_use)},
                                             {{"kept"}, static_cast<double>(mapped.kept)}};
      });
  if (device_monitor_ != nullptr) RegisterDeviceGauges(*device_monitor_);
  if (!staging_rings_.empty()) RegisterStagingMetrics(staging_rings_);
  if (host_pinner_ != nullptr) RegisterPinningMetrics(host_pinner_);
  const std::string backend = backend_name_;
  MemoryBudget* budget = memory_budget_.get();
  metrics_registry_->AddGaugeCallback(
      "fedagg_memory_accounted_bytes",
      "Bytes held for client data: updates being received, pending batches, accumulators.", {},
      [budget] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(budget->used())}}; });
  metrics_registry_->AddGaugeCallback(
      "fedagg_memory_budget_bytes", "The memory budget (--memory_budget_bytes); 0: none.", {},
      [budget] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(budget->limit())}}; });
  if (ingest_window_ != nullptr) RegisterIngestWindowMetrics(*ingest_window_);
  metrics_registry_->AddGaugeCallback("fedagg_backend_info", "The reduction backend in use.", {"backend"},
                                      [backend] { return MetricsRegistry::GaugeSamples{{{backend}, 1}}; });
  metrics_registry_->AddGaugeCallback(
      "fedagg_process_resident_memory_bytes", "Resident memory of the fedagg-server process.", {},
      [] { return MetricsRegistry::GaugeSamples{{{}, ProcessResidentBytes()}}; });
}

void FedaggServer::RegisterIngestWindowMetrics(const IngestWindow& window) {
  const IngestWindow* ingest = &window;  // the server's: outlives its metrics endpoint
  metrics_registry_->AddGaugeCallback(
      "fedagg_ingest_window_used_bytes",
      "Update bytes held now: being received or waiting in pending batches (--ingest_window_mib).", {},
      [ingest] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(ingest->used())}}; });
  metrics_registry_->AddGaugeCallback(
      "fedagg_ingest_window_bytes", "The ingest window (--ingest_window_mib).", {},
      [ingest] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(ingest->capacity())}}; });
  metrics_registry_->AddGaugeCallback(
      "fedagg_ingest_waiting_updates", "Updates whose stream is paused until their bytes fit in the ingest window.",
      {}, [ingest] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(ingest->waiting())}}; });
  metrics_registry_->AddCounterCallback(
      "fedagg_ingest_waits_total", "Updates that had to wait for their place in the ingest window.", {},
      [ingest] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(ingest->waits())}}; });
}

void FedaggServer::RegisterDeviceGauges(const DeviceMonitor& monitor) {
  // Each scrape reads the devices afresh; a device that cannot be read leaves both
  // families without series (absent), rather than reporting a stale or made-up value.
  const DeviceMonitor* devices = &monitor;  // the backend's: outlives the server
  const auto device_memory = [devices](uint64_t DeviceMemoryReading::*bytes) {
    return [devices, bytes] {
      MetricsRegistry::GaugeSamples samples;
      absl::StatusOr<std::vector<DeviceMemoryReading>> readings = devices->ReadMemory();
      if (!readings.ok()) return samples;
      for (const DeviceMemoryReading& reading : *readings) {
        samples.push_back({{absl::StrCat(reading.device)}, static_cast<double>(reading.*bytes)});
      }
      return samples;
    };
  };
  metrics_registry_->AddGaugeCallback(
      "fedagg_gpu_memory_used_bytes",
      "Memory in use on each device the backend reduces on, by every process (total minus free).",
      {"device"}, device_memory(&DeviceMemoryReading::used_bytes));
  metrics_registry_->AddGaugeCallback("fedagg_gpu_memory_total_bytes",
                                      "Memory of each device the backend reduces on.", {"device"},
                                      device_memory(&DeviceMemoryReading::total_bytes));
}

void FedaggServer::RegisterStagingMetrics(const std::vector<const StagingRingStats*>& rings) {
  // The rings are the backend's: they outlive the server.
  const auto per_ring = [rings](auto read) {
    return [rings, read] {
      MetricsRegistry::GaugeSamples samples;
      for (const StagingRingStats* ring : rings) {
        samples.push_back({{absl::StrCat(ring->device())}, static_cast<double>(read(*ring))});
      }
      return samples;
    };
  };
  metrics_registry_->AddGaugeCallback("fedagg_staging_slots", "Slots of each device's staging ring (--staging_slots).",
                                      {"device"}, per_ring([](const StagingRingStats& r) { return r.slots(); }));
  metrics_registry_->AddGaugeCallback(
      "fedagg_staging_slots_in_use", "Staging slots being packed, copied to the device or reduced.", {"device"},
      per_ring([](const StagingRingStats& r) { return r.slots_in_use(); }));
  metrics_registry_->AddGaugeCallback(
      "fedagg_staging_host_bytes", "Host memory of the staging slots allocated so far (pinned, for cuda).",
      {"device"}, per_ring([](const StagingRingStats& r) { return r.host_bytes(); }));
  metrics_registry_->AddCounterCallback(
      "fedagg_staging_bytes_total", "Bytes copied to the device through the staging slots.", {"device"},
      per_ring([](const StagingRingStats& r) { return r.bytes_staged(); }));
  metrics_registry_->AddCounterCallback(
      "fedagg_staging_packed_bytes_total",
      "Of those, bytes packed into a staging slot on the host before their copy (weights, offsets, reordered "
      "entries); the rest went to the device straight from the received updates.",
      {"device"}, per_ring([](const StagingRingStats& r) { return r.bytes_packed(); }));
  const auto histograms = [rings](const Histogram& (StagingRingStats::*which)() const) {
    return [rings, which] {
      MetricsRegistry::HistogramViews views;
      for (const StagingRingStats* ring : rings) views.push_back({{absl::StrCat(ring->device())}, &(ring->*which)()});
      return views;
    };
  };
  metrics_registry_->AddHistogramCallback("fedagg_staging_copy_seconds",
                                          "Host-to-device copy of one staging slot, as the device timed it.",
                                          {"device"}, histograms(&StagingRingStats::copy_seconds));
  metrics_registry_->AddHistogramCallback("fedagg_staging_reduce_seconds",
                                          "Reduction of one staging slot on the device (kernels included).",
                                          {"device"}, histograms(&StagingRingStats::reduce_seconds));
}

void FedaggServer::RegisterPinningMetrics(std::shared_ptr<const MeasuredHostMemoryPinner> pinner) {
  const auto read = [pinner](auto figure) {
    return [pinner, figure] { return MetricsRegistry::GaugeSamples{{{}, static_cast<double>(figure(*pinner))}}; };
  };
  metrics_registry_->AddGaugeCallback(
      "fedagg_pinned_host_bytes",
      "Host memory pinned now for received updates (cuda), the cached mappings included.", {},
      read([](const MeasuredHostMemoryPinner& p) { return p.pinned_bytes(); }));
  metrics_registry_->AddCounterCallback(
      "fedagg_host_pins_total", "Mappings of received updates pinned; none once the mapping cache is warm.", {},
      read([](const MeasuredHostMemoryPinner& p) { return p.pins(); }));
  metrics_registry_->AddCounterCallback(
      "fedagg_host_pin_failures_total", "Mappings the backend could not pin (then used unpinned, copied slower).",
      {}, read([](const MeasuredHostMemoryPinner& p) { return p.failures(); }));
  metrics_registry_->AddCounterCallback(
      "fedagg_host_pin_seconds_total",
      "Seconds spent pinning and unpinning, on the threads that map and unmap update buffers.", {},
      read([](const MeasuredHostMemoryPinner& p) { return p.seconds(); }));
}

void FedaggServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // The HTTP listeners first: no request is in progress after this, and uploads not
  // submitted are discarded (their client ids freed, nothing counted).
  api_http_.reset();
  metrics_http_.reset();
  http_api_.reset();
  if (checkpointer_ != nullptr) checkpointer_->Stop();
  // Updates waiting for their place are refused, so their streams can end.
  if (ingest_window_ != nullptr) ingest_window_->Close();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  // An intermediate stopped with a grace (SIGTERM: a rolling update) pushes what it
  // acknowledged since its last push before it goes; with none it stops at once.
  if (parent_link_ != nullptr && grace > absl::ZeroDuration()) parent_link_->ForwardBeforeStopping();
  parent_link_.reset();
}

FedaggServer::~FedaggServer() { Shutdown(absl::ZeroDuration()); }

}  // namespace fedagg
