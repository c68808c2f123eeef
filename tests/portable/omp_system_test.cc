// OmpSystem::WorkScope: the threads of the parallel regions a thread starts follow the size
// of the work while the scope lives — one for a small batch, the team for a large one —
// and are the team's again afterwards.
#include "portable/omp_system.h"

#include <omp.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace fedagg::portable {
namespace {

constexpr int64_t kPerThread = OmpSystem::WorkScope::kElementsPerThread;

// How many threads a parallel region started on this thread has.
int RegionThreads() {
  int threads = 0;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
  }
  return threads;
}

class WorkScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    team_ = omp_get_max_threads();
    omp_set_num_threads(4);
    omp_set_dynamic(0);  // regions get exactly the threads asked for
  }
  void TearDown() override { omp_set_num_threads(team_); }

 private:
  int team_ = 1;
};

TEST_F(WorkScopeTest, ASmallBatchRunsOnTheCallingThreadAlone) {
  {
    const OmpSystem::WorkScope scope(kPerThread - 1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    EXPECT_EQ(RegionThreads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), 4);
  EXPECT_EQ(RegionThreads(), 4);
}

TEST_F(WorkScopeTest, ThreadsGrowWithTheWorkUpToTheTeam) {
  {
    const OmpSystem::WorkScope scope(3 * kPerThread);
    EXPECT_EQ(RegionThreads(), 3);
  }
  {
    const OmpSystem::WorkScope scope(100 * kPerThread);
    EXPECT_EQ(RegionThreads(), 4);
  }
  {
    const OmpSystem::WorkScope empty(0);
    EXPECT_EQ(RegionThreads(), 1);
  }
  EXPECT_EQ(RegionThreads(), 4);
}

}  // namespace
}  // namespace fedagg::portable
