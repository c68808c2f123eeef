// BatchReducer: the batching and reduction of one aggregation's committed updates into its
// partial aggregate.
//
// Committed updates wait in a pending batch. A batch that is full (batch_size updates, or
// batch_max_bytes of payload; an update as large as that makes a batch of one) is queued
// and reduced on the reduction workers, a thread pool of the node's, never on the thread
// that added the update: that is a gRPC reactor's, which must not block, and a node
// reduces several aggregations' batches at once. One aggregation's batches are reduced one
// at a time, in the order they were queued. What the queue holds is bounded by the node's
// ingest window (the updates' bytes count there until they are reduced and freed).
//
// The owner (Aggregation) adds an update under its own state lock, so an update it counted
// is always pending, queued or in the partial. Whatever needs the partial to hold exactly
// what was counted (a checkpoint, a delta, the result) takes a Hold: it waits for the
// reduction running now, if any, then, under the owner's lock, takes what is still queued
// or pending (TakeWaiting), and reduces it on its own thread (Reduce) — after releasing the
// owner's lock where it can, so that the owner's other callers do not wait for it.
//
// Lock order: Hold (the partial) before the owner's lock, before the batch queue's lock.
#ifndef FEDAGG_SERVICE_ROUNDS_BATCH_REDUCER_H_
#define FEDAGG_SERVICE_ROUNDS_BATCH_REDUCER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/core/accumulator_factory.h"
#include "service/core/memory_budget.h"
#include "service/core/mutex.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reduction_spec.h"
#include "service/core/thread_pool.h"
#include "service/core/update_buffer.h"

namespace fedagg {

struct BatchReducerOptions {
  int batch_size = 16;  // updates reduced together
  // A batch is also full once its updates hold this many payload bytes, so that large
  // models are reduced a few at a time and do not pile up batch_size copies in memory.
  uint64_t batch_max_bytes = uint64_t{64} << 20;
  // Where batches are reduced: a pool with workers (threads() > 1; one without would
  // reduce on the committing thread, under its owner's lock), which must outlive the
  // reducer's queued work. Null: a process-wide pool (DefaultReductionWorkers).
  ThreadPool* workers = nullptr;
  // Called after each batch is reduced, with its duration and size (metrics).
  std::function<void(absl::Duration, size_t)> on_batch_reduced;
  // The partial aggregate's accumulators are accounted here (optional; must outlive the
  // reducer).
  MemoryBudget* memory_budget = nullptr;
};

class BatchReducer : public std::enable_shared_from_this<BatchReducer> {
 public:
  // Shared: a queued reduction keeps the reducer alive until it has run.
  static std::shared_ptr<BatchReducer> Create(std::shared_ptr<const ReductionSpec> spec,
                                              const AccumulatorFactory& backend, BatchReducerOptions options);

  // A pool sized for batch reductions on this machine (a quarter of its cores, at least 2,
  // at most 8): enough for several aggregations, or several device streams, at once; each
  // reduction on the CPU backend is itself spread over every core.
  static int DefaultWorkerThreads();
  // The process-wide pool used when the options name none (tests; programs that embed an
  // aggregation without a server).
  static ThreadPool& DefaultReductionWorkers();

  // Adds a counted update, validated against the spec (ValidateUpdate), to the pending
  // batch; a full batch is queued for reduction. Never waits for a reduction.
  void Add(UpdateBuffer update);
  // Queues the pending batch now, whatever its size: it is older than the flush interval,
  // or the ingest window is full and new updates wait for the bytes it holds.
  void QueuePending();
  // Drops what is pending or queued (the aggregation was cancelled); a reduction already
  // running completes.
  void Discard();
  // Whether the oldest pending update arrived `age` or longer before `now`.
  bool PendingOlderThan(absl::Duration age, absl::Time now) const;
  // Updates added and not yet reduced: pending or queued (metrics: queue depth).
  int64_t waiting_updates() const;

  // Batches taken out of the reducer to be reduced by whoever holds the partial.
  class Waiting {
   private:
    friend class BatchReducer;
    std::deque<std::vector<UpdateBuffer>> batches_;
  };

  // Exclusive use of the partial aggregate, for the life of the scope: no reduction runs
  // meanwhile. Not movable: construct it where it is used. (Its methods run with the
  // partial's lock held, taken by the constructor, which the analysis cannot follow.)
  class Hold {
   public:
    explicit Hold(BatchReducer& reducer);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

    // The batches waiting (queued or pending), taken out of the reducer: call with the
    // owner's lock held, so that they and the partial hold exactly what the owner counted;
    // updates committed afterwards wait for the next reduction, which the hold keeps out.
    // Reduce them (Reduce) with the owner's lock released, so that its other callers do
    // not wait for the reduction.
    Waiting TakeWaiting() ABSL_NO_THREAD_SAFETY_ANALYSIS;
    // Reduces batches TakeWaiting took into the partial, on this thread. Returns the first
    // backend failure of any reduction: after one, the partial is unspecified and later
    // batches are dropped.
    absl::Status Reduce(Waiting waiting) ABSL_NO_THREAD_SAFETY_ANALYSIS;
    PartialAggregate& partial() ABSL_NO_THREAD_SAFETY_ANALYSIS;
    // Replaces the partial (a restored checkpoint; a fresh one after a delta went up)
    // and accounts its memory.
    void ReplacePartial(PartialAggregate partial) ABSL_NO_THREAD_SAFETY_ANALYSIS;
    // Brings the memory budget's claim up to date after the partial changed in place
    // (a merged child partial).
    void AccountMemory() ABSL_NO_THREAD_SAFETY_ANALYSIS;

   private:
    BatchReducer& reducer_;
  };

 private:
  BatchReducer(std::shared_ptr<const ReductionSpec> spec, const AccumulatorFactory& backend,
               BatchReducerOptions options);
  // With batch_mu_ held: moves the pending batch to the queue; true when no drain is
  // scheduled yet, so the caller must StartDrain (after releasing batch_mu_).
  bool QueuePendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(batch_mu_);
  void StartDrain();
  // Runs on a worker: reduces queued batches until none is left.
  void DrainQueue();
  // Accumulates `batch` into the partial (or drops it after an earlier failure).
  void ReduceBatch(std::vector<UpdateBuffer>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(partial_mu_);
  void AccountMemory() ABSL_EXCLUSIVE_LOCKS_REQUIRED(partial_mu_);

  const BatchReducerOptions options_;
  ThreadPool& workers_;

  // Lock order: partial_mu_ before batch_mu_.
  Mutex partial_mu_ ABSL_ACQUIRED_BEFORE(batch_mu_);
  PartialAggregate partial_ ABSL_GUARDED_BY(partial_mu_);
  absl::Status error_ ABSL_GUARDED_BY(partial_mu_);
  MemoryReservation partial_memory_ ABSL_GUARDED_BY(partial_mu_);

  mutable Mutex batch_mu_;
  std::vector<UpdateBuffer> pending_ ABSL_GUARDED_BY(batch_mu_);
  uint64_t pending_bytes_ ABSL_GUARDED_BY(batch_mu_) = 0;
  absl::Time pending_since_ ABSL_GUARDED_BY(batch_mu_);  // when the oldest pending update arrived
  std::deque<std::vector<UpdateBuffer>> queued_ ABSL_GUARDED_BY(batch_mu_);
  int64_t queued_updates_ ABSL_GUARDED_BY(batch_mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(batch_mu_) = false;  // a DrainQueue is scheduled or running
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_BATCH_REDUCER_H_
