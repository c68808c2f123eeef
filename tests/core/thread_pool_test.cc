// Tests of the thread pool: ParallelFor covers its range exactly once in contiguous
// chunks, respects the chunk and thread limits, really runs chunks in parallel, runs
// inline on a one-thread pool, and is safe to call from several threads; Run runs tasks
// on a worker in order (inline without one); the process-wide pool has a thread per core
// this process may use.
#include "service/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/machine_resources.h"
#include "service/core/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace fedagg {
namespace {

struct Chunk {
  int64_t begin, end;
  std::thread::id thread;
};

// Runs ParallelFor and returns the chunks it produced, sorted by begin.
std::vector<Chunk> Chunks(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  Mutex mu;
  std::vector<Chunk> chunks;
  pool.ParallelFor(n, min_chunk, [&](int64_t begin, int64_t end) {
    MutexLock lock(&mu);
    chunks.push_back(Chunk{begin, end, std::this_thread::get_id()});
  });
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  return chunks;
}

TEST(ThreadPoolTest, ThreadsCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).threads(), 1);
  EXPECT_EQ(ThreadPool(2).threads(), 2);
  EXPECT_EQ(ThreadPool(5).threads(), 5);
}

TEST(ThreadPoolTest, CoversTheRangeExactlyOnceInContiguousChunks) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 5, 7, 10, 16, 100, 1001, 65536, 100003}) {
      for (int64_t min_chunk : {0, 1, 2, 3, 7, 64, 1000, 1 << 15}) {
        SCOPED_TRACE(absl::StrCat("threads ", threads, " n ", n, " min_chunk ", min_chunk));
        const std::vector<Chunk> chunks = Chunks(pool, n, min_chunk);
        ASSERT_FALSE(chunks.empty());
        EXPECT_LE(static_cast<int>(chunks.size()), threads);
        int64_t next = 0;
        for (const Chunk& c : chunks) {
          EXPECT_EQ(c.begin, next);
          EXPECT_LT(c.begin, c.end);  // no empty chunks
          next = c.end;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
}

// thread_pool.h: "each at least `min_chunk` long (except when n is smaller)".
TEST(ThreadPoolTest, ChunksAreAtLeastMinChunkLong) {
  for (int threads : {2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {3, 5, 7, 10, 11, 100, 1001, 100003}) {
      for (int64_t min_chunk : {1, 2, 3, 7, 64, 1 << 15}) {
        for (const Chunk& c : Chunks(pool, n, min_chunk)) {
          if (c.end - c.begin < std::min(n, min_chunk)) {
            // One example is enough to show the problem.
            FAIL() << "ThreadPool(" << threads << ").ParallelFor(" << n << ", " << min_chunk
                   << ") ran chunk [" << c.begin << ", " << c.end << "), shorter than min_chunk";
          }
        }
      }
    }
  }
}

TEST(ThreadPoolTest, NothingToDo) {
  ThreadPool pool(3);
  int calls = 0;
  pool.ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, SmallRangesRunInlineAsOneChunk) {
  ThreadPool pool(4);
  // n below 2 * min_chunk: splitting would make a chunk shorter than min_chunk.
  const std::vector<Chunk> chunks = Chunks(pool, 100, 60);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].begin, 0);
  EXPECT_EQ(chunks[0].end, 100);
  EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
}

TEST(ThreadPoolTest, OneThreadPoolRunsEverythingOnTheCaller) {
  ThreadPool pool(1);
  const std::vector<Chunk> chunks = Chunks(pool, 1 << 20, 1);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
}

TEST(ThreadPoolTest, FirstChunkRunsOnTheCallerAndTheRestOnWorkers) {
  ThreadPool pool(4);
  const std::vector<Chunk> chunks = Chunks(pool, 4000, 1);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
  std::set<std::thread::id> workers;
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_NE(chunks[i].thread, std::this_thread::get_id());
    workers.insert(chunks[i].thread);
  }
  EXPECT_GE(workers.size(), 1u);
}

// Every chunk waits until all chunks have started: passes only if they run at the same time.
TEST(ThreadPoolTest, ChunksRunConcurrently) {
  constexpr int kThreads = 3;
  ThreadPool pool(kThreads);
  Mutex mu;
  int started = 0;
  bool all_met = true;
  pool.ParallelFor(kThreads, 1, [&](int64_t, int64_t) {
    MutexLock lock(&mu);
    ++started;
    auto everyone_here = [&] { return started == kThreads; };
    if (!mu.AwaitWithTimeout(everyone_here, absl::Seconds(20))) all_met = false;
  });
  EXPECT_EQ(started, kThreads);
  EXPECT_TRUE(all_met) << "chunks did not run concurrently";
}

TEST(ThreadPoolTest, SafeToCallFromSeveralThreads) {
  ThreadPool pool(3);
  constexpr int kCallers = 4;
  constexpr int kCallsEach = 200;
  std::vector<int64_t> totals(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int call = 0; call < kCallsEach; ++call) {
        const int64_t n = 1000 + t * 17 + call;
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
          int64_t local = 0;
          for (int64_t i = begin; i < end; ++i) local += i;
          sum += local;
        });
        if (sum.load() == n * (n - 1) / 2) ++totals[t];
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(totals[t], kCallsEach) << "caller " << t;
}

TEST(ThreadPoolTest, LargeRangeSumsCorrectly) {
  ThreadPool pool(4);
  const int64_t n = int64_t{1} << 22;
  std::vector<int> hits(static_cast<size_t>(n), 0);
  pool.ParallelFor(n, 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), n);
}

TEST(ThreadPoolTest, PoolsStartAndStopCleanly) {
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(1 + round % 5);
    std::atomic<int64_t> covered{0};
    pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) { covered += end - begin; });
    EXPECT_EQ(covered.load(), 100);
  }
  // A pool that never ran anything stops too.
  { ThreadPool idle(4); }
}

TEST(ThreadPoolTest, DefaultPoolIsSharedAndSizedToTheMachine) {
  ThreadPool& a = ThreadPool::Default();
  ThreadPool& b = ThreadPool::Default();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<int64_t> covered{0};
  a.ParallelFor(1 << 16, 1024, [&](int64_t begin, int64_t end) { covered += end - begin; });
  EXPECT_EQ(covered.load(), 1 << 16);
}

TEST(ThreadPoolTest, RunRunsTasksOnAWorkerInOrder) {
  Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    ThreadPool pool(2);  // one worker
    for (int i = 0; i < 50; ++i) {
      pool.Run([&, i] {
        MutexLock lock(&mu);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
  }  // the destructor runs what is still queued, then joins
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  for (const std::thread::id& thread : threads) EXPECT_NE(thread, std::this_thread::get_id());
}

TEST(ThreadPoolTest, RunWithoutAWorkerRunsInline) {
  ThreadPool pool(1);
  std::thread::id ran_on;
  pool.Run([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ThreadPoolTest, TheDefaultPoolHasAThreadPerCoreThisProcessMayUse) {
  EXPECT_EQ(ThreadPool::Default().threads(), ReadMachineResources().cores);
}

}  // namespace
}  // namespace fedagg
