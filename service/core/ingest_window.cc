// IngestWindow and IngestTicket: the bound on update bytes held at once, with waiting.
#include "service/core/ingest_window.h"

#include <algorithm>
#include <utility>

namespace fedagg {
namespace {
absl::Status ShuttingDown() {
  return absl::UnavailableError(
      "this server is shutting down; the update was not received: send it to another aggregator "
      "or again once the server is back");
}
}  // namespace

IngestTicket::IngestTicket(IngestTicket&& other) noexcept
    : window_(std::exchange(other.window_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

IngestTicket& IngestTicket::operator=(IngestTicket&& other) noexcept {
  if (this != &other) {
    Release();
    window_ = std::exchange(other.window_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void IngestTicket::Release() {
  if (window_ != nullptr) window_->Release(bytes_);
  window_ = nullptr;
  bytes_ = 0;
}

IngestWindow::IngestWindow(uint64_t capacity_bytes)
    : capacity_(capacity_bytes), dispatcher_([this] { DispatchLoop(); }) {}

IngestWindow::~IngestWindow() {
  Close();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  dispatcher_.join();
}

void IngestWindow::SetPressureHandler(std::function<void()> handler) {
  MutexLock lock(&mu_);
  on_pressure_ = std::move(handler);
}

bool IngestWindow::FitsLocked(uint64_t bytes) const {
  // An update larger than the whole window goes alone, when nothing else is held.
  return capacity_ == 0 || used_ == 0 || bytes <= capacity_ - std::min(used_, capacity_);
}

void IngestWindow::Acquire(uint64_t bytes, Grant granted) {
  absl::StatusOr<IngestTicket> now = ShuttingDown();
  {
    MutexLock lock(&mu_);
    if (!closed_) {
      if (!waiting_.empty() || !FitsLocked(bytes)) {
        waiting_.push_back(Waiter{bytes, std::move(granted)});
        ++waits_;
        pressure_ = true;
        return;
      }
      used_ += bytes;
      now = IngestTicket(this, bytes);
    }
  }
  granted(std::move(now));
}

void IngestWindow::Release(uint64_t bytes) {
  MutexLock lock(&mu_);
  used_ -= bytes;
  AdmitLocked();
}

void IngestWindow::AdmitLocked() {
  while (!waiting_.empty() && FitsLocked(waiting_.front().bytes)) {
    Waiter waiter = std::move(waiting_.front());
    waiting_.pop_front();
    used_ += waiter.bytes;
    ready_.emplace_back(std::move(waiter.granted), IngestTicket(this, waiter.bytes));
  }
}

void IngestWindow::Close() {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  for (Waiter& waiter : waiting_) {
    ready_.emplace_back(std::move(waiter.granted), ShuttingDown());
  }
  waiting_.clear();
  mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !in_pressure_handler_; });
}

void IngestWindow::DispatchLoop() {
  while (true) {
    std::vector<std::pair<Grant, absl::StatusOr<IngestTicket>>> ready;
    bool pressure = false;
    std::function<void()> on_pressure;
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || pressure_ || !ready_.empty(); });
      if (stopping_ && ready_.empty()) return;
      ready.swap(ready_);
      pressure = std::exchange(pressure_, false) && !waiting_.empty() && !closed_ && on_pressure_;
      if (pressure) on_pressure = on_pressure_;
      in_pressure_handler_ = pressure;
    }
    // Outside the lock: a grant starts an update, a handler reduces batches (which frees
    // tickets, which may take the lock again).
    for (auto& [granted, ticket] : ready) granted(std::move(ticket));
    if (pressure) {
      on_pressure();
      MutexLock lock(&mu_);
      in_pressure_handler_ = false;
    }
  }
}

uint64_t IngestWindow::used() const {
  MutexLock lock(&mu_);
  return used_;
}

int64_t IngestWindow::waiting() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(waiting_.size());
}

int64_t IngestWindow::waits() const {
  MutexLock lock(&mu_);
  return waits_;
}

}  // namespace fedagg
