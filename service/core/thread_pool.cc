// A fixed pool of worker threads: a blocking ParallelFor, and background tasks.
#include "service/core/thread_pool.h"

#include <algorithm>
#include <utility>

#include "service/core/machine_resources.h"

namespace fedagg {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return HasWorkOrStopping(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t chunks = std::min<int64_t>(threads(), max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  // Balanced split: chunk c is [c*n/chunks, (c+1)*n/chunks), at least n/chunks >= min_chunk long.
  auto bound = [n, chunks](int64_t c) { return static_cast<int64_t>((static_cast<__int128>(c) * n) / chunks); };
  Mutex done_mu;
  int64_t remaining = chunks - 1;
  {
    MutexLock lock(&mu_);
    for (int64_t c = 1; c < chunks; ++c) {
      const int64_t begin = bound(c);
      const int64_t end = bound(c + 1);
      tasks_.push_back([&fn, &done_mu, &remaining, begin, end] {
        fn(begin, end);
        MutexLock done_lock(&done_mu);
        --remaining;
      });
    }
  }
  fn(0, bound(1));
  MutexLock done_lock(&done_mu);
  done_mu.Await([&remaining] { return remaining == 0; });
}

void ThreadPool::Run(std::function<void()> task) {
  if (workers_.empty()) {
    task();
    return;
  }
  MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

ThreadPool& ThreadPool::Default() {
  // Lives for the whole process on purpose: accumulators may still run at static
  // destruction time, so the pool is never torn down before them.
  static ThreadPool* pool = new ThreadPool(ReadMachineResources().cores);
  return *pool;
}

}  // namespace fedagg
