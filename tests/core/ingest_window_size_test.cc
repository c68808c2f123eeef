// The automatic ingest window and the machine resources it is derived from: cgroup v2
// limits parsed, the window scaled with cores within its bounds and under its caps.
#include "service/core/ingest_window_size.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "service/core/machine_resources.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::kMiB;
constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(MachineResourcesTest, CgroupLimitsAreParsed) {
  EXPECT_EQ(CoresFromCpuMax("400000 100000\n"), 4);
  EXPECT_EQ(CoresFromCpuMax("150000 100000"), 2);  // 1.5 CPUs: rounded up
  EXPECT_EQ(CoresFromCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax(""), std::nullopt);
  EXPECT_EQ(CoresFromCpuMax("0 100000"), std::nullopt);
  EXPECT_EQ(BytesFromMemoryMax("2147483648\n"), 2 * kGiB);
  EXPECT_EQ(BytesFromMemoryMax("max\n"), std::nullopt);
  EXPECT_EQ(BytesFromMemoryMax(""), std::nullopt);
}

TEST(MachineResourcesTest, ThisProcessHasACoreAndMemory) {
  const MachineResources resources = ReadMachineResources();
  EXPECT_GE(resources.cores, 1);
  EXPECT_GT(resources.memory_bytes, 0u);
}

TEST(IngestWindowSizeTest, SixteenMiBPerCoreWithinItsBounds) {
  const uint64_t plenty = 512 * kGiB;
  EXPECT_EQ(AutoIngestWindow({1, plenty}, 0).bytes, 64 * kMiB);   // at least 64 MiB
  EXPECT_EQ(AutoIngestWindow({2, plenty}, 0).bytes, 64 * kMiB);
  EXPECT_EQ(AutoIngestWindow({8, plenty}, 0).bytes, 128 * kMiB);
  EXPECT_EQ(AutoIngestWindow({16, plenty}, 0).bytes, 256 * kMiB);
  EXPECT_EQ(AutoIngestWindow({256, plenty}, 0).bytes, 1 * kGiB);  // at most 1 GiB
  EXPECT_TRUE(absl::StrContains(AutoIngestWindow({16, plenty}, 0).reason, "16 cores"));
}

TEST(IngestWindowSizeTest, CappedByTheBudgetAndTheMachinesMemory) {
  const IngestWindowSize budget = AutoIngestWindow({16, 512 * kGiB}, 256 * kMiB);
  EXPECT_EQ(budget.bytes, 64 * kMiB);  // a quarter of the budget
  EXPECT_TRUE(absl::StrContains(budget.reason, "--memory_budget_bytes")) << budget.reason;
  const IngestWindowSize memory = AutoIngestWindow({16, 1 * kGiB}, 0);
  EXPECT_EQ(memory.bytes, 64 * kMiB);  // a sixteenth of the machine
  EXPECT_TRUE(absl::StrContains(memory.reason, "sixteenth")) << memory.reason;
  EXPECT_EQ(AutoIngestWindow({16, 512 * kGiB}, 1 * kMiB).bytes, 1 * kMiB);  // never below 1 MiB
}

}  // namespace
}  // namespace fedagg
