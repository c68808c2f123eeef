// The staging ring: slot allocation and leases, back pressure, and the compute threads
// (one per lane) that wait for each slot's copy and run its reduction, in submission
// order within a lane.
#include "portable/staging_ring.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "service/core/status_macros.h"

namespace fedagg::portable {
namespace {

// Bucket bounds of the copy and reduction histograms, in seconds: 10 µs to 10 s.
std::vector<double> SecondsBuckets() {
  return {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5, 10};
}

}  // namespace

StagingRing::Lease::Lease(Lease&& other) noexcept
    : ring_(std::exchange(other.ring_, nullptr)), slot_(other.slot_) {}

StagingRing::Lease& StagingRing::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (ring_ != nullptr) ring_->Release(slot_);
    ring_ = std::exchange(other.ring_, nullptr);
    slot_ = other.slot_;
  }
  return *this;
}

StagingRing::Lease::~Lease() {
  if (ring_ != nullptr) ring_->Release(slot_);
}

void* StagingRing::Lease::host() const {
  MutexLock lock(&ring_->mu_);
  return ring_->buffers_[slot_]->host();
}

size_t StagingRing::Lease::capacity() const { return ring_->options_.slot_bytes; }

StagingRing::StagingRing(std::unique_ptr<CopyEngine> engine, StagingRingOptions options)
    : options_(options),
      engine_(std::move(engine)),
      copy_seconds_(SecondsBuckets()),
      reduce_seconds_(SecondsBuckets()) {
  const int lanes = std::max(options_.lanes, 1);
  {
    MutexLock lock(&mu_);
    jobs_.resize(static_cast<size_t>(lanes));
  }
  for (int lane = 0; lane < lanes; ++lane) compute_.emplace_back([this, lane] { RunReductions(lane); });
}

StagingRing::~StagingRing() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await([&] { return acquiring_ == 0; });  // every Acquire has seen it and left
  }
  for (std::thread& thread : compute_) thread.join();
}

absl::Status StagingRing::AllocateSlots() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_ || growth_failed_ || static_cast<int>(buffers_.size()) + allocating_ >= options_.slots) {
        return absl::OkStatus();
      }
      ++allocating_;
    }
    FEDAGG_ASSIGN_OR_RETURN(const int slot, AllocateSlot());
    MutexLock lock(&mu_);
    free_.push_back(slot);
  }
}

int StagingRing::AssignLane() {
  MutexLock lock(&mu_);
  const int lane = next_lane_;
  next_lane_ = (next_lane_ + 1) % static_cast<int>(jobs_.size());
  return lane;
}

absl::StatusOr<StagingRing::Lease> StagingRing::Acquire() {
  {
    MutexLock lock(&mu_);
    ++acquiring_;
  }
  absl::StatusOr<Lease> lease = AcquireSlot();
  MutexLock lock(&mu_);
  --acquiring_;
  return lease;
}

absl::StatusOr<StagingRing::Lease> StagingRing::AcquireSlot() {
  while (true) {
    {
      MutexLock lock(&mu_);
      mu_.Await([&] {
        return stopping_ || !free_.empty() ||
               (!growth_failed_ && static_cast<int>(buffers_.size()) + allocating_ < options_.slots);
      });
      if (stopping_) return absl::CancelledError("the staging ring is shutting down");
      if (!free_.empty()) {
        const int slot = free_.back();
        free_.pop_back();
        return Lease(this, slot);
      }
      ++allocating_;
    }
    absl::StatusOr<int> slot = AllocateSlot();
    if (slot.ok()) return Lease(this, *slot);
    // With slots already allocated the ring runs on those (growth_failed_ is set); without
    // any it cannot run.
    MutexLock lock(&mu_);
    if (buffers_.empty()) return slot.status();
  }
}

absl::StatusOr<int> StagingRing::AllocateSlot() {
  absl::StatusOr<std::unique_ptr<StagingBuffer>> buffer = engine_->Allocate(options_.slot_bytes);
  MutexLock lock(&mu_);
  --allocating_;
  if (!buffer.ok()) {
    if (!buffers_.empty()) growth_failed_ = true;
    return buffer.status();
  }
  buffers_.push_back(*std::move(buffer));
  return static_cast<int>(buffers_.size()) - 1;
}

StagingRing::Submission StagingRing::Submit(Lease lease, std::vector<CopySpan> spans, Reduction reduction, int lane) {
  const int slot = lease.slot_;
  lease.ring_ = nullptr;  // the slot now belongs to the job, released after its reduction
  StagingBuffer* buffer;
  {
    MutexLock lock(&mu_);
    buffer = buffers_[slot].get();
  }
  uint64_t bytes = 0, packed = 0;
  const std::byte* host = static_cast<const std::byte*>(buffer->host());
  for (const CopySpan& span : spans) {
    bytes += span.bytes;
    const std::byte* from = static_cast<const std::byte*>(span.from);
    if (from >= host && from < host + buffer->bytes()) packed += span.bytes;
  }
  absl::Status started = engine_->StartCopy(*buffer, spans);
  Submission submission;
  if (started.ok()) submission.buffer = buffer;
  MutexLock lock(&mu_);
  if (started.ok()) {
    bytes_staged_ += bytes;
    bytes_packed_ += packed;
  }
  jobs_[static_cast<size_t>(lane)].push_back(Job{slot, std::move(started), std::move(reduction)});
  return submission;
}

void StagingRing::WaitRead(const Submission& submission) {
  // The slot cannot be reused before this copy is done (its reduction comes first), so
  // the copy last started on the buffer is this one or a later one: either way, once it
  // is done this one is. Its failure reaches the reduction, which reports it.
  if (submission.buffer != nullptr) static_cast<void>(engine_->WaitCopied(*submission.buffer));
}

void StagingRing::Release(int slot) {
  MutexLock lock(&mu_);
  free_.push_back(slot);
}

int StagingRing::slots_in_use() const {
  MutexLock lock(&mu_);
  return static_cast<int>(buffers_.size() - free_.size());
}

uint64_t StagingRing::host_bytes() const {
  MutexLock lock(&mu_);
  return static_cast<uint64_t>(buffers_.size()) * options_.slot_bytes;
}

uint64_t StagingRing::bytes_staged() const {
  MutexLock lock(&mu_);
  return bytes_staged_;
}

uint64_t StagingRing::bytes_packed() const {
  MutexLock lock(&mu_);
  return bytes_packed_;
}

void StagingRing::RunReductions(int lane) {
  const absl::Status bound = engine_->BindThread(lane);
  while (true) {
    Job job;
    StagingBuffer* buffer;
    bool cancelled;
    {
      MutexLock lock(&mu_);
      std::deque<Job>& jobs = jobs_[static_cast<size_t>(lane)];
      mu_.Await([&] { return stopping_ || !jobs.empty(); });
      if (jobs.empty()) return;  // stopping, and every job submitted here has been answered
      job = std::move(jobs.front());
      jobs.pop_front();
      buffer = buffers_[job.slot].get();
      cancelled = stopping_;
    }
    absl::StatusOr<const void*> data = buffer->device();
    if (!job.started.ok()) {
      data = job.started;
    } else {
      // A started copy is always waited for, cancelled or not: the slot is reused after.
      absl::StatusOr<absl::Duration> copied = engine_->WaitCopied(*buffer);
      if (copied.ok()) {
        copy_seconds_.Observe(absl::ToDoubleSeconds(*copied));
      } else {
        data = copied.status();
      }
    }
    if (data.ok() && cancelled) {
      data = absl::CancelledError("the staging ring shut down before the batch was reduced");
    } else if (data.ok() && !bound.ok()) {
      data = bound;
    }
    const bool reducing = data.ok();
    const absl::Time start = absl::Now();
    job.reduction(std::move(data));
    if (reducing) reduce_seconds_.Observe(absl::ToDoubleSeconds(absl::Now() - start));
    Release(job.slot);
  }
}

}  // namespace fedagg::portable
