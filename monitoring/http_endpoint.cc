// HttpEndpoint: a single-threaded HTTP/1.1 responder for metrics and health probes.
#include "monitoring/http_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr int kPollMillis = 100;

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Bad Request";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the scraper went away; nothing to do
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& address, std::map<std::string, Handler> handlers) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port (e.g. 0.0.0.0:9464)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "': ", ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->handlers_ = std::move(handlers);
  FileDescriptor listener(::socket(found->ai_family, found->ai_socktype, found->ai_protocol));
  if (listener.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listener.get(), found->ai_addr, found->ai_addrlen) != 0 || ::listen(listener.get(), 16) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on '", address, "': ", std::strerror(errno)));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  endpoint->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                      : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  endpoint->listener_ = std::move(listener);
  HttpEndpoint* raw = endpoint.get();
  endpoint->thread_ = std::thread([raw] { raw->Serve(); });
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void HttpEndpoint::Serve() {
  while (!stopping_) {
    pollfd ready{listener_.get(), POLLIN, 0};
    if (::poll(&ready, 1, kPollMillis) <= 0) continue;
    FileDescriptor connection(::accept(listener_.get(), nullptr, nullptr));
    if (connection.get() < 0) continue;
    const timeval timeout{2, 0};  // a slow client cannot hold the endpoint for long
    ::setsockopt(connection.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(connection.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    Answer(connection.get());
  }
}

void HttpEndpoint::Answer(int connection) {
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const ssize_t n = ::recv(connection, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  HttpResponse response;
  const size_t first_space = request.find(' ');
  const size_t second_space = request.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos) {
    response = {400, "text/plain; charset=utf-8", "malformed request\n"};
  } else {
    const std::string method = request.substr(0, first_space);
    std::string path = request.substr(first_space + 1, second_space - first_space - 1);
    path = path.substr(0, path.find('?'));
    auto handler = handlers_.find(path);
    if (method != "GET" && method != "HEAD") {
      response = {405, "text/plain; charset=utf-8", "only GET is supported\n"};
    } else if (handler == handlers_.end()) {
      response = {404, "text/plain; charset=utf-8", "not found; try /metrics, /healthz or /readyz\n"};
    } else {
      response = handler->second();
    }
    if (method == "HEAD") response.body.clear();
  }
  WriteAll(connection, absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status),
                                    "\r\nContent-Type: ", response.content_type,
                                    "\r\nContent-Length: ", response.body.size(),
                                    "\r\nConnection: close\r\n\r\n", response.body));
}

}  // namespace fedagg
