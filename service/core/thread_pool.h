// A fixed pool of worker threads: data-parallel loops in the CPU backend (ParallelFor
// splits a range into contiguous chunks, runs one on the calling thread and the rest on
// workers, and returns when all are done), and tasks run in the background (Run: the
// batch reductions of service/rounds/batch_reducer.h, on a pool of their own). Safe to
// call from several threads. Tasks still queued when the pool is destroyed run first.
#ifndef FEDAGG_SERVICE_CORE_THREAD_POOL_H_
#define FEDAGG_SERVICE_CORE_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "service/core/mutex.h"

namespace fedagg {

class ThreadPool {
 public:
  // `threads` counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each at least
  // `min_chunk` long (except when n is smaller), using up to threads() threads.
  void ParallelFor(int64_t n, int64_t min_chunk, absl::FunctionRef<void(int64_t, int64_t)> fn);

  // Runs `task` on a worker, in the order tasks were given; inline when the pool has no
  // worker (threads() == 1).
  void Run(std::function<void()> task);

  // A process-wide pool with one thread per core this process may use: its CPU affinity,
  // or its container's cgroup CPU limit when lower (machine_resources.h), not every core
  // of the machine (a pod limited to 4 CPUs on a 64-core node gets 4 threads, not 64).
  static ThreadPool& Default();

 private:
  void WorkerLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !tasks_.empty();
  }

  Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_THREAD_POOL_H_
