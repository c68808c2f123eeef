// HttpServer: one HTTP/1.1 listener of fedagg-server (cpp-httplib's server on a pool of
// threads), plain or over TLS. The metrics endpoint (/metrics, /healthz, /readyz) and the
// HTTP path of clients without streams (service/http/http_api.h) register their routes on
// one; when both are asked for on the same address, they share it.
#ifndef FEDAGG_SERVICE_HTTP_HTTP_SERVER_H_
#define FEDAGG_SERVICE_HTTP_HTTP_SERVER_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace fedagg {

struct HttpServerOptions {
  // Requests served at once (each keep-alive connection holds a thread while it waits).
  int threads = 16;
  // TLS when both are set (PEM files); with `client_ca`, clients must present a
  // certificate it signed.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
};

class HttpServer {
 public:
  // A server with no route yet; routes are added on routes() before Listen.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(const HttpServerOptions& options);
  ~HttpServer();  // stops serving and joins the threads

  httplib::Server& routes() { return *server_; }
  // Listens on "host:port" (port 0 picks one) and serves on a thread of its own; `what`
  // names the listener in a refusal ("metrics", "the HTTP path").
  absl::Status Listen(const std::string& address, const std::string& what);
  int port() const { return port_; }

 private:
  HttpServer() = default;

  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_HTTP_SERVER_H_
