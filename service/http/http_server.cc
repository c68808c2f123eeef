// The HTTP listener: cpp-httplib's server, plain or TLS, on a thread of its own.
#include "service/http/http_server.h"

#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fedagg {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("TLS on the HTTP listener needs both --tls_cert and --tls_key");
  }
  if (options.tls_cert.empty()) {
    http->server_ = std::make_unique<httplib::Server>();
  } else {
    http->server_ = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr : options.tls_client_ca.c_str());
  }
  if (!http->server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot set up TLS on the HTTP listener from '", options.tls_cert,
                                                   "' and '", options.tls_key,
                                                   "': check that both are readable PEM files that belong together"));
  }
  // A client writing an upload in chunks reuses its connection for all of them (the
  // library's default closes it after 5 requests); an idle one still goes after 5 s, as
  // it holds a thread meanwhile.
  http->server_->set_keep_alive_max_count(1000);
  // Without it an answer on a reused connection waits for the client's delayed ACK (Nagle):
  // about 40 ms a request, which made a 16 MiB upload in 1 MiB chunks 6x slower.
  http->server_->set_tcp_nodelay(true);
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, with which a second server
  // on a port already in use would start and share it instead of failing.
  http->server_->set_socket_options([](socket_t socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const int threads = std::max(options.threads, 1);
  http->server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  return http;
}

absl::Status HttpServer::Listen(const std::string& address, const std::string& what) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("the address for ", what, " '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (port == 0) {
    port_ = server_->bind_to_any_port(host);
  } else if (server_->bind_to_port(host, port)) {
    port_ = port;
  }
  if (port_ <= 0) {
    port_ = 0;
    return absl::UnavailableError(absl::StrCat("cannot listen for ", what, " on '", address,
                                               "' (address in use, or not an address of this host?)"));
  }
  thread_ = std::thread([server = server_.get()] { server->listen_after_bind(); });
  // Serving before returning: a stop() that came before the loop started would be lost,
  // and the destructor's join would wait forever.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!server_->is_running()) {
    if (absl::Now() > give_up) return absl::InternalError(absl::StrCat("the listener for ", what, " on '", address, "' did not start"));
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

HttpServer::~HttpServer() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fedagg
