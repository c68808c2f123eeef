// BatchReducer: pending batch, queue of full batches, and their reduction on the workers.
#include "service/rounds/batch_reducer.h"

#include <algorithm>
#include <utility>

#include "service/core/machine_resources.h"

namespace fedagg {

std::shared_ptr<BatchReducer> BatchReducer::Create(std::shared_ptr<const ReductionSpec> spec,
                                                   const AccumulatorFactory& backend,
                                                   BatchReducerOptions options) {
  return std::shared_ptr<BatchReducer>(new BatchReducer(std::move(spec), backend, std::move(options)));
}

BatchReducer::BatchReducer(std::shared_ptr<const ReductionSpec> spec, const AccumulatorFactory& backend,
                           BatchReducerOptions options)
    : options_(std::move(options)),
      workers_(options_.workers != nullptr ? *options_.workers : DefaultReductionWorkers()),
      partial_(std::move(spec), backend) {
  MutexLock lock(&partial_mu_);
  if (options_.memory_budget != nullptr) partial_memory_ = options_.memory_budget->ReserveUnchecked(0);
  AccountMemory();
}

int BatchReducer::DefaultWorkerThreads() { return std::clamp(ReadMachineResources().cores / 4, 2, 8); }

ThreadPool& BatchReducer::DefaultReductionWorkers() {
  // Lives for the whole process, like ThreadPool::Default: queued reductions may still
  // run at static destruction time.
  static ThreadPool* pool = new ThreadPool(1 + DefaultWorkerThreads());
  return *pool;
}

void BatchReducer::Add(UpdateBuffer update) {
  bool start_drain = false;
  {
    MutexLock lock(&batch_mu_);
    if (pending_.empty()) pending_since_ = absl::Now();
    pending_bytes_ += update.total_bytes();
    pending_.push_back(std::move(update));
    if (static_cast<int>(pending_.size()) >= options_.batch_size || pending_bytes_ >= options_.batch_max_bytes) {
      start_drain = QueuePendingLocked();
    }
  }
  if (start_drain) StartDrain();
}

void BatchReducer::QueuePending() {
  bool start_drain = false;
  {
    MutexLock lock(&batch_mu_);
    start_drain = QueuePendingLocked();
  }
  if (start_drain) StartDrain();
}

bool BatchReducer::QueuePendingLocked() {
  if (pending_.empty()) return false;
  queued_updates_ += static_cast<int64_t>(pending_.size());
  queued_.push_back(std::move(pending_));
  pending_.clear();
  pending_bytes_ = 0;
  if (draining_) return false;
  draining_ = true;
  return true;
}

void BatchReducer::StartDrain() {
  workers_.Run([self = shared_from_this()] { self->DrainQueue(); });
}

void BatchReducer::Discard() {
  std::vector<UpdateBuffer> pending;
  std::deque<std::vector<UpdateBuffer>> queued;
  {
    MutexLock lock(&batch_mu_);
    pending.swap(pending_);
    queued.swap(queued_);
    pending_bytes_ = 0;
    queued_updates_ = 0;
  }
  // The updates' memory is freed here, outside the lock.
}

bool BatchReducer::PendingOlderThan(absl::Duration age, absl::Time now) const {
  MutexLock lock(&batch_mu_);
  return !pending_.empty() && now - pending_since_ >= age;
}

int64_t BatchReducer::waiting_updates() const {
  MutexLock lock(&batch_mu_);
  return queued_updates_ + static_cast<int64_t>(pending_.size());
}

void BatchReducer::DrainQueue() {
  for (;;) {
    MutexLock reduce(&partial_mu_);
    std::vector<UpdateBuffer> batch;
    {
      MutexLock lock(&batch_mu_);
      if (queued_.empty()) {
        draining_ = false;
        return;
      }
      batch = std::move(queued_.front());
      queued_.pop_front();
      queued_updates_ -= static_cast<int64_t>(batch.size());
    }
    ReduceBatch(batch);
  }
}

void BatchReducer::ReduceBatch(std::vector<UpdateBuffer>& batch) {
  if (batch.empty()) return;
  // Every update was validated before it was counted (so it is not validated again here),
  // and this fails only for lack of backend resources (device memory: RESOURCE_EXHAUSTED)
  // or on a bug. After a failure the partial is unspecified: later batches are dropped and
  // the aggregation fails.
  if (!error_.ok()) {
    batch.clear();
    return;
  }
  std::vector<UpdateView> views;
  views.reserve(batch.size());
  for (const UpdateBuffer& buffer : batch) views.push_back(buffer.view());
  const absl::Time start = absl::Now();
  error_.Update(partial_.AccumulateValidatedBatch(views));
  if (options_.on_batch_reduced) options_.on_batch_reduced(absl::Now() - start, batch.size());
  batch.clear();  // releases the updates' memory (and their share of the ingest window)
  AccountMemory();
}

void BatchReducer::AccountMemory() { partial_memory_.ResizeUnchecked(partial_.MemoryBytes()); }

BatchReducer::Hold::Hold(BatchReducer& reducer) : reducer_(reducer) { reducer_.partial_mu_.Lock(); }

BatchReducer::Hold::~Hold() { reducer_.partial_mu_.Unlock(); }

BatchReducer::Waiting BatchReducer::Hold::TakeWaiting() {
  Waiting waiting;
  MutexLock lock(&reducer_.batch_mu_);
  waiting.batches_.swap(reducer_.queued_);
  if (!reducer_.pending_.empty()) waiting.batches_.push_back(std::move(reducer_.pending_));
  reducer_.pending_.clear();
  reducer_.pending_bytes_ = 0;
  reducer_.queued_updates_ = 0;
  return waiting;
}

absl::Status BatchReducer::Hold::Reduce(Waiting waiting) {
  for (std::vector<UpdateBuffer>& batch : waiting.batches_) reducer_.ReduceBatch(batch);
  return reducer_.error_;
}

PartialAggregate& BatchReducer::Hold::partial() { return reducer_.partial_; }

void BatchReducer::Hold::ReplacePartial(PartialAggregate partial) {
  reducer_.partial_ = std::move(partial);
  reducer_.AccountMemory();
}

void BatchReducer::Hold::AccountMemory() { reducer_.AccountMemory(); }

}  // namespace fedagg
