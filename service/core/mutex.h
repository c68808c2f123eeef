// fedagg's mutex: std::mutex plus a condition variable, with Abseil's thread-safety
// annotations and an Await(predicate) in the style of absl::Mutex. fedagg uses it
// instead of absl::Mutex because the packaged Abseil is not built with ThreadSanitizer
// annotations: with std::mutex (pthread underneath) the tsan preset sees every
// happens-before edge of fedagg's own locking.
#ifndef FEDAGG_SERVICE_CORE_MUTEX_H_
#define FEDAGG_SERVICE_CORE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fedagg {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes every Await so it re-checks its predicate.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    changed_.notify_all();
    mu_.unlock();
  }

  // Releases the mutex until `ready()` holds (checked with the mutex held), then returns
  // with the mutex held again.
  template <typename Predicate>
  void Await(Predicate ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    changed_.wait(lock, ready);
    lock.release();
  }
  // Like Await, giving up at `deadline`; returns whether `ready()` holds.
  template <typename Predicate>
  bool AwaitWithDeadline(Predicate ready, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    const bool result = deadline == absl::InfiniteFuture()
                            ? (changed_.wait(lock, ready), true)
                            : changed_.wait_until(lock, absl::ToChronoTime(deadline), ready);
    lock.release();
    return result;
  }
  template <typename Predicate>
  bool AwaitWithTimeout(Predicate ready, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(ready, absl::Now() + timeout);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
};

// Holds a Mutex for the life of the scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_MUTEX_H_
