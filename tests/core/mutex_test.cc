// Tests of fedagg's Mutex: Await returns once another thread makes its predicate hold,
// a waiter is not woken by releases that leave its predicate false, a thread that changes
// the state and then waits itself wakes the waiter it made ready, and AwaitWithDeadline
// gives up at its deadline.
#include "service/core/mutex.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace fedagg {
namespace {

TEST(MutexTest, AwaitReturnsOnceAnotherThreadMakesThePredicateHold) {
  Mutex mu;
  bool ready = false;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    MutexLock lock(&mu);
    ready = true;
  });
  MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ready; }, absl::Seconds(30)));
  setter.join();
}

TEST(MutexTest, ReleasesThatLeaveThePredicateFalseDoNotWakeTheWaiter) {
  Mutex mu;
  int counter = 0;
  bool stop = false;
  std::atomic<int> checks_by_waiter{0};
  std::atomic<bool> waiting{false};
  std::thread waiter([&] {
    const std::thread::id self = std::this_thread::get_id();
    MutexLock lock(&mu);
    waiting = true;
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (std::this_thread::get_id() == self) ++checks_by_waiter;
      return stop;
    });
  });
  while (!waiting) absl::SleepFor(absl::Milliseconds(1));
  for (int i = 0; i < 10000; ++i) {
    MutexLock lock(&mu);
    ++counter;
  }
  const int checks_before_stop = checks_by_waiter;
  {
    MutexLock lock(&mu);
    stop = true;
  }
  waiter.join();
  // The waiter checked on entry and maybe on a rare spurious wakeup; it was not woken by
  // each of the 10,000 releases (the old mutex woke every waiter on every release).
  EXPECT_LT(checks_before_stop, 10);
  EXPECT_EQ(counter, 10000);
}

TEST(MutexTest, WaitingAfterAChangeWakesTheWaiterItMadeReady) {
  Mutex mu;
  bool ping = false, pong = false;
  std::atomic<bool> waiting{false};
  std::thread responder([&] {
    MutexLock lock(&mu);
    waiting = true;
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ping; });
    pong = true;
  });
  while (!waiting) absl::SleepFor(absl::Milliseconds(1));
  {
    MutexLock lock(&mu);
    ping = true;  // no release between this change and the wait below
    EXPECT_TRUE(mu.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pong; }, absl::Seconds(30)));
  }
  responder.join();
}

TEST(MutexTest, AwaitWithDeadlineGivesUpAtTheDeadline) {
  Mutex mu;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(mu.AwaitWithTimeout([] { return false; }, absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

}  // namespace
}  // namespace fedagg
