// Test support: a loopback TCP relay in front of one server port. Clients connect to the
// relay's port; it passes bytes both ways, and on request stops passing the server's bytes
// to clients (so an ack the server sent is lost) or cuts every open connection (so streams
// break as they do when a connection is reset).
#ifndef FEDAGG_TESTS_INTEGRATION_TCP_RELAY_H_
#define FEDAGG_TESTS_INTEGRATION_TCP_RELAY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "service/core/mutex.h"

namespace fedagg::testing {

class TcpRelay {
 public:
  explicit TcpRelay(int server_port) : server_port_(server_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(0);
    socklen_t length = sizeof(address);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;  // port() stays 0; the test's connection then fails visibly
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~TcpRelay() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    if (acceptor_.joinable()) acceptor_.join();
    CutConnections();
    std::vector<std::thread> pumps;
    std::vector<int> fds;
    {
      MutexLock lock(&mu_);
      pumps.swap(pumps_);
      fds.swap(fds_);
    }
    for (std::thread& pump : pumps) pump.join();
    for (int fd : fds) ::close(fd);
    ::close(listen_fd_);
  }

  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  // While true, what the server sends is read and thrown away instead of passed on.
  void set_drop_server_bytes(bool drop) { drop_server_bytes_ = drop; }
  // Shuts down every connection open now (both sides); later connections pass as before.
  void CutConnections() {
    MutexLock lock(&mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }

  void AcceptLoop() {
    for (;;) {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address = Loopback(server_port_);
      MutexLock lock(&mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::shutdown(client, SHUT_RDWR);
        continue;
      }
      pumps_.emplace_back([this, client, server] { Pump(client, server, /*from_server=*/false); });
      pumps_.emplace_back([this, client, server] { Pump(server, client, /*from_server=*/true); });
    }
  }

  // Copies `from` to `to` until either side ends, then shuts down both.
  void Pump(int from, int to, bool from_server) {
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::read(from, buffer, sizeof(buffer));
      if (n <= 0) break;
      if (from_server && drop_server_bytes_) continue;
      ssize_t written = 0;
      while (written < n) {
        const ssize_t w = ::send(to, buffer + written, static_cast<size_t>(n - written), MSG_NOSIGNAL);
        if (w <= 0) break;
        written += w;
      }
      if (written < n) break;
    }
    ::shutdown(from, SHUT_RDWR);
    ::shutdown(to, SHUT_RDWR);
  }

  const int server_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> drop_server_bytes_{false};
  std::thread acceptor_;
  Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);        // closed only in the destructor
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_INTEGRATION_TCP_RELAY_H_
