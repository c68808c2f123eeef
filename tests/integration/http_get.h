// Test support: plain HTTP GETs to a server's /metrics, /healthz and /readyz endpoint on
// loopback, and one sample's value read from its /metrics exposition.
#ifndef FEDAGG_TESTS_INTEGRATION_HTTP_GET_H_
#define FEDAGG_TESTS_INTEGRATION_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <sstream>
#include <string>

namespace fedagg::testing {

// GET `path` from 127.0.0.1:port; returns the whole HTTP response.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    (void)::send(fd, request.data(), request.size(), 0);
    char buffer[4096];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

// The value of the sample named exactly `sample` (labels included, e.g.
// `fedagg_partial_forwards_total{result="failed"}`) on the /metrics of 127.0.0.1:port;
// nullopt when it is not exported.
inline std::optional<double> MetricSample(int port, const std::string& sample) {
  std::istringstream lines(HttpGet(port, "/metrics"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > sample.size() && line.compare(0, sample.size(), sample) == 0 && line[sample.size()] == ' ') {
      return std::stod(line.substr(sample.size() + 1));
    }
  }
  return std::nullopt;
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_INTEGRATION_HTTP_GET_H_
