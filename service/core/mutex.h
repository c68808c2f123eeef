// fedagg's mutex: std::mutex with Abseil's thread-safety annotations and an
// Await(predicate) in the style of absl::Mutex. fedagg uses it instead of absl::Mutex
// because the packaged Abseil is not built with ThreadSanitizer annotations: with
// std::mutex (pthread underneath) the tsan preset sees every happens-before edge of
// fedagg's own locking.
//
// As in absl::Mutex, a thread that releases the mutex evaluates the predicates of the
// threads waiting in Await (the mutex still held) and wakes only those whose predicate
// now holds, each on its own condition variable. So a long-lived waiter (a ticker, a
// worker idle on its queue) costs nothing when the mutex is taken for anything else; a
// mutex taken per update with one waiter beside it no longer wakes that waiter every
// time (two context switches per update on the ingest path, before).
#ifndef FEDAGG_SERVICE_CORE_MUTEX_H_
#define FEDAGG_SERVICE_CORE_MUTEX_H_

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fedagg {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes the Awaits whose predicate holds now.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    WakeReadyWaiters();
    mu_.unlock();
  }

  // Releases the mutex until `ready()` holds (checked with the mutex held, by this thread
  // or by the thread releasing the mutex), then returns with the mutex held again.
  template <typename Predicate>
  void Await(Predicate ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    (void)AwaitWithDeadline(ready, absl::InfiniteFuture());
  }
  // Like Await, giving up at `deadline`; returns whether `ready()` holds.
  template <typename Predicate>
  bool AwaitWithDeadline(Predicate ready, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    if (ready()) return true;
    Waiter waiter{ready};
    waiters_.push_back(&waiter);
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    bool result = false;
    for (;;) {
      // What this thread changed before waiting may be what another waiter waits for.
      WakeReadyWaiters();
      if (deadline == absl::InfiniteFuture()) {
        waiter.wake.wait(lock);
      } else if (waiter.wake.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout) {
        result = ready();
        break;
      }
      if (ready()) {  // woken (the predicate may have changed again since) or spuriously
        result = true;
        break;
      }
      waiter.woken = false;
    }
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &waiter));
    lock.release();
    return result;
  }
  template <typename Predicate>
  bool AwaitWithTimeout(Predicate ready, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(ready, absl::Now() + timeout);
  }

 private:
  struct Waiter {
    absl::FunctionRef<bool()> ready;
    std::condition_variable wake;
    bool woken = false;  // told its predicate held; cleared when it no longer did
  };
  // With mu_ held.
  void WakeReadyWaiters() {
    for (Waiter* waiter : waiters_) {
      if (!waiter->woken && waiter->ready()) {
        waiter->woken = true;
        waiter->wake.notify_one();
      }
    }
  }

  std::mutex mu_;
  std::vector<Waiter*> waiters_;  // the threads in Await, guarded by mu_
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
