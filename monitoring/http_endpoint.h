// HttpEndpoint: the small HTTP/1.1 server behind --metrics_address. It answers GET
// requests for a fixed set of paths (/metrics, /healthz, /readyz) from one thread, one
// connection at a time, closing each connection after its response. It is for scrapers
// and probes on a trusted network, not a general web server.
#ifndef FEDAGG_MONITORING_HTTP_ENDPOINT_H_
#define FEDAGG_MONITORING_HTTP_ENDPOINT_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace fedagg {

// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpEndpoint {
 public:
  using Handler = std::function<HttpResponse()>;

  // Listens on "host:port" (port 0 picks one) and serves `handlers` by path.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& address,
                                                             std::map<std::string, Handler> handlers);
  ~HttpEndpoint();  // stops serving and joins the thread

  int port() const { return port_; }

 private:
  HttpEndpoint() = default;
  void Serve();
  void Answer(int connection);

  FileDescriptor listener_;
  int port_ = 0;
  std::map<std::string, Handler> handlers_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace fedagg

#endif  // FEDAGG_MONITORING_HTTP_ENDPOINT_H_
