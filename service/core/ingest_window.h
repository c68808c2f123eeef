// IngestWindow: bounds the bytes of client updates a node holds at once — from the
// moment an update's buffer is allocated until it is reduced (or abandoned) and freed —
// by making senders wait instead of refusing them. An update starts (Acquire) only when
// its bytes fit beside those already held; until then its stream reads nothing more, so
// gRPC flow control holds the sender back. An update larger than the whole window is
// admitted when the window is empty, alone. Waiters are granted in arrival order, so a
// large update is not starved by small ones. This is what keeps an aggregation's peak
// memory near its accumulator plus one update, whatever the number of streams.
//
// Grants of waiting updates run on the window's own thread, never on the thread that
// freed the bytes (which may hold an aggregation's locks). When an update has to wait,
// the pressure handler (set once, before serving) is asked to reduce pending batches now
// rather than at their flush interval, since their bytes count in the window too.
//   Ticket   RAII claim on part of the window; freeing it may grant waiters.
//   Close    at shutdown: waiters and later requests get UNAVAILABLE.
// A window of 0 bytes admits everything at once (no bound). Thread-safe.
#ifndef FEDAGG_SERVICE_CORE_INGEST_WINDOW_H_
#define FEDAGG_SERVICE_CORE_INGEST_WINDOW_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/mutex.h"

namespace fedagg {

class IngestWindow;

class IngestTicket {
 public:
  IngestTicket() = default;  // holds nothing
  IngestTicket(IngestTicket&& other) noexcept;
  IngestTicket& operator=(IngestTicket&& other) noexcept;
  IngestTicket(const IngestTicket&) = delete;
  IngestTicket& operator=(const IngestTicket&) = delete;
  ~IngestTicket() { Release(); }

  uint64_t bytes() const { return bytes_; }

 private:
  friend class IngestWindow;
  IngestTicket(IngestWindow* window, uint64_t bytes) : window_(window), bytes_(bytes) {}
  void Release();

  IngestWindow* window_ = nullptr;
  uint64_t bytes_ = 0;
};

class IngestWindow {
 public:
  using Grant = std::function<void(absl::StatusOr<IngestTicket>)>;

  explicit IngestWindow(uint64_t capacity_bytes);
  ~IngestWindow();  // closes the window; every ticket must be gone by now
  IngestWindow(const IngestWindow&) = delete;
  IngestWindow& operator=(const IngestWindow&) = delete;

  // Only before serving: called (on the window's thread) each time a request starts waiting.
  void SetPressureHandler(std::function<void()> handler);

  // Claims `bytes`. `granted` runs inline when they fit now (and no one waits before
  // this request), later on the window's thread otherwise; with UNAVAILABLE once closed.
  void Acquire(uint64_t bytes, Grant granted);
  // Refuses the waiters and every later request with UNAVAILABLE (server shutdown), and
  // returns once the pressure handler is not running and will not run again.
  void Close();

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  int64_t waiting() const;
  // Requests that had to wait, since the start (a counter for metrics).
  int64_t waits() const;

 private:
  friend class IngestTicket;
  struct Waiter {
    uint64_t bytes;
    Grant granted;
  };
  bool FitsLocked(uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(uint64_t bytes);
  // Moves the waiters at the head of the queue that now fit to ready_.
  void AdmitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The window's thread: runs grants, refusals and the pressure handler.
  void DispatchLoop();

  const uint64_t capacity_;
  std::function<void()> on_pressure_;
  mutable Mutex mu_;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Waiter> waiting_ ABSL_GUARDED_BY(mu_);
  // Granted (ticket already counted in used_) or refused (closed), to be told on the
  // window's thread.
  std::vector<std::pair<Grant, absl::StatusOr<IngestTicket>>> ready_ ABSL_GUARDED_BY(mu_);
  bool pressure_ ABSL_GUARDED_BY(mu_) = false;
  bool in_pressure_handler_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread dispatcher_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_INGEST_WINDOW_H_
