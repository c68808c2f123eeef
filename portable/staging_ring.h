// StagingRing: the pipeline between receiving a batch and reducing it on a device. A ring
// of `slots` slot buffers (host memory + device memory each, made by a CopyEngine): the
// caller lists a batch's spans (straight from the received updates, or packed into the
// slot's host memory), their copy to the device starts at once on the engine's copy
// queue, and the reduction runs on the ring's compute thread as soon as that copy is
// done, after every reduction submitted before it on its lane. So copying batch k and
// reducing batch k-1 overlap. A ring has `lanes` compute threads (for cuda, each with a
// stream of its own), so several reductions run at once; an accumulator's batches all go
// to one lane (AssignLane), so they keep their order. The caller waits only for the copy
// (WaitRead), never for a reduction, before it frees the updates.
//   back pressure  Acquire blocks while every slot is packed, copying or reducing;
//   failures       a copy that fails (or cannot start) skips its reduction: the reduction's
//                  callback receives the error instead of the data, in its turn;
//   shutdown       the destructor wakes every waiting Acquire (CANCELLED) and waits for it
//                  to return, cancels the reductions not yet started (their callbacks
//                  receive CANCELLED once their copies are done), lets the running ones
//                  finish and joins the compute threads. No lease may outlive the ring.
// Slots are allocated on first use, or all at once by AllocateSlots (a server's device
// backend does that at start). One ring serves every accumulator of a backend on one
// device; it is thread-safe.
#ifndef FEDAGG_PORTABLE_STAGING_RING_H_
#define FEDAGG_PORTABLE_STAGING_RING_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "monitoring/metrics_registry.h"
#include "portable/copy_engine.h"
#include "service/core/mutex.h"
#include "service/core/staging_monitor.h"

namespace fedagg::portable {

struct StagingRingOptions {
  int slots = 4;
  size_t slot_bytes = size_t{64} << 20;
  // Reductions that may run at once, one compute thread each; at least 1.
  int lanes = 1;
  int device = 0;  // the device the engine copies to, for metric labels
};

class StagingRing final : public StagingRingStats {
 public:
  // Called on the compute thread with the batch's device memory once its copy is done,
  // or with why there is none (the copy failed, or the ring is shutting down).
  using Reduction = std::function<void(absl::StatusOr<const void*> device_data)>;

  // A slot held by one caller between Acquire and Submit; a lease dropped without being
  // submitted returns its slot. Must not outlive the ring.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    void* host() const;
    size_t capacity() const;

   private:
    friend class StagingRing;
    Lease(StagingRing* ring, int slot) : ring_(ring), slot_(slot) {}
    StagingRing* ring_ = nullptr;
    int slot_ = -1;
  };

  // What Submit started: WaitRead waits for its copy.
  class Submission {
   private:
    friend class StagingRing;
    StagingBuffer* buffer = nullptr;  // null: the copy did not start
  };

  StagingRing(std::unique_ptr<CopyEngine> engine, StagingRingOptions options);
  ~StagingRing() override;
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Allocates every slot not allocated yet, now rather than on first use: the first batches
  // then wait for no allocation (pinned host memory is slow to allocate), and a machine
  // that cannot hold the slots says so at once. The first failure is returned; the slots
  // allocated are kept, and with at least one, Acquire does not try to grow again.
  absl::Status AllocateSlots();
  // The lane for a new accumulator's batches: the lanes in turn.
  int AssignLane();
  // A free slot, waiting while none is (back pressure). RESOURCE_EXHAUSTED when the first
  // slot cannot be allocated; CANCELLED once the ring is shutting down.
  absl::StatusOr<Lease> Acquire();
  // Starts copying `spans` to the lease's device memory and queues `reduction` on `lane`
  // (from AssignLane), after every reduction submitted there before. Never waits for the
  // device. The spans' memory must stay unchanged until WaitRead(the submission) returns.
  Submission Submit(Lease lease, std::vector<CopySpan> spans, Reduction reduction, int lane = 0);
  // Waits until the submission's copy no longer reads its spans' memory (done or failed;
  // its reduction hears of a failure). Never waits for a reduction.
  void WaitRead(const Submission& submission);

  // StagingRingStats, read by the metrics endpoint.
  int device() const override { return options_.device; }
  int slots() const override { return options_.slots; }
  uint64_t slot_bytes() const override { return options_.slot_bytes; }
  int slots_in_use() const override;
  uint64_t host_bytes() const override;
  uint64_t bytes_staged() const override;
  uint64_t bytes_packed() const override;
  const Histogram& copy_seconds() const override { return copy_seconds_; }
  const Histogram& reduce_seconds() const override { return reduce_seconds_; }

 private:
  struct Job {
    int slot;
    absl::Status started;  // whether the copy could start
    Reduction reduction;
  };
  absl::StatusOr<Lease> AcquireSlot();
  // Allocates one slot, counted in allocating_ by the caller (under mu_); its index, or the
  // engine's failure (with slots allocated already, growth_failed_ is set then).
  absl::StatusOr<int> AllocateSlot();
  void Release(int slot);
  void RunReductions(int lane);

  const StagingRingOptions options_;
  std::unique_ptr<CopyEngine> engine_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<StagingBuffer>> buffers_ ABSL_GUARDED_BY(mu_);  // allocated slots
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);                                // their free ones
  int allocating_ ABSL_GUARDED_BY(mu_) = 0;  // slots being allocated outside the lock
  bool growth_failed_ ABSL_GUARDED_BY(mu_) = false;  // an allocation failed: keep the slots there are
  std::vector<std::deque<Job>> jobs_ ABSL_GUARDED_BY(mu_);  // per lane
  int next_lane_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int acquiring_ ABSL_GUARDED_BY(mu_) = 0;  // callers inside Acquire
  uint64_t bytes_staged_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_packed_ ABSL_GUARDED_BY(mu_) = 0;  // of those, copied from the slots' host memory
  Histogram copy_seconds_;
  Histogram reduce_seconds_;
  std::vector<std::thread> compute_;  // one per lane
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_STAGING_RING_H_
