// fedagg-server's network flags: where it listens and serves metrics and the HTTP path, TLS, who may call it
// and how much each caller and stream may hold.
#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "service/flags/flag_values.h"
#include "service/flags/server_flags.h"
#include "service/core/status_macros.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "address:port to serve gRPC on (port 0: pick one)");
ABSL_FLAG(std::string, metrics_address, std::string(fedagg::kMetricsAddressAuto),
          "host:port serving Prometheus /metrics, /healthz and /readyz over HTTP; 'auto': the "
          "--listen host on a free port (logged at start); empty: off");
ABSL_FLAG(std::string, http_address, "",
          "host:port serving the HTTP path of clients without gRPC streams (browsers): tasks, "
          "resumable uploads, status, results, the JavaScript client at /fedagg.mjs "
          "(docs/PROTOCOL.md 4a); over TLS with --tls_cert; the --metrics_address value "
          "serves both on one listener; empty: off");
ABSL_FLAG(absl::Duration, upload_idle_timeout, absl::Minutes(5),
          "an HTTP upload that no request asks about for this long is discarded (nothing "
          "counted, its memory and client id freed), and a finished one's answer forgotten");
ABSL_FLAG(int, http_threads, 32,
          "requests the HTTP path serves at once (each open keep-alive connection holds one)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for the listener (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for the listener");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA that client certificates must chain to (mTLS)");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "file with one accepted bearer token per line; calls without one get UNAUTHENTICATED");
ABSL_FLAG(int, max_streams_per_identity, 0,
          "Contribute and Submit streams one caller (certificate, bearer token, or peer "
          "address) may hold open; more are refused with RESOURCE_EXHAUSTED; 0: no limit");
ABSL_FLAG(absl::Duration, stall_timeout, absl::Seconds(60),
          "an update that receives no message for this long is discarded and its stream "
          "ended with DEADLINE_EXCEEDED (e.g. 30s, 2m); 0: never");
ABSL_FLAG(int64_t, stream_window_kib, 1024,
          "HTTP/2 receive window of each stream, KiB: what a sender may have in flight beyond "
          "what this node has read, so also what each paused stream buffers here; 0: gRPC's "
          "own, which grows with the bandwidth-delay product");

namespace fedagg {

absl::Status ApplyNetworkFlags(ServerConfig& config) {
  config.listen_address = absl::GetFlag(FLAGS_listen);
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.http_address = absl::GetFlag(FLAGS_http_address);
  config.upload_idle_timeout = absl::GetFlag(FLAGS_upload_idle_timeout);
  config.http_threads = absl::GetFlag(FLAGS_http_threads);
  if (config.http_threads < 1) return absl::InvalidArgumentError("--http_threads must be at least 1");
  config.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_client_ca)};
  FEDAGG_ASSIGN_OR_RETURN(config.auth_tokens, ReadTokenFile(absl::GetFlag(FLAGS_auth_tokens_file)));
  config.max_streams_per_identity = absl::GetFlag(FLAGS_max_streams_per_identity);
  config.stall_timeout = absl::GetFlag(FLAGS_stall_timeout);
  FEDAGG_ASSIGN_OR_RETURN(const uint64_t stream_window_kib,
                          NonNegativeFlag("stream_window_kib", absl::GetFlag(FLAGS_stream_window_kib)));
  config.stream_window_bytes = stream_window_kib << 10;
  return absl::OkStatus();
}

}  // namespace fedagg
