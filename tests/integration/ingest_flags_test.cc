// fedagg-server's ingest flags reach the server's configuration (ApplyIngestFlags): the
// bounds on finished aggregations in their units, and a value out of range refused with
// INVALID_ARGUMENT naming its flag.
#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/flags/server_flags.h"

ABSL_DECLARE_FLAG(int, retain_finished);
ABSL_DECLARE_FLAG(int64_t, retain_finished_mib);
ABSL_DECLARE_FLAG(int64_t, finished_grace_s);

namespace fedagg {
namespace {

using ::testing::HasSubstr;

TEST(IngestFlagsTest, TheBoundsOnFinishedAggregationsReachTheConfiguration) {
  absl::FlagSaver restore_flags;
  absl::SetFlag(&FLAGS_retain_finished, 8);
  absl::SetFlag(&FLAGS_retain_finished_mib, 256);
  absl::SetFlag(&FLAGS_finished_grace_s, 30);
  ServerConfig config;
  std::string window_reason;
  ASSERT_TRUE(ApplyIngestFlags(config, &window_reason).ok());
  EXPECT_EQ(config.retain_finished, 8);
  EXPECT_EQ(config.retain_finished_bytes, uint64_t{256} << 20);
  EXPECT_EQ(config.finished_grace, absl::Seconds(30));
}

TEST(IngestFlagsTest, ZeroTurnsTheByteBoundAndTheGraceOff) {
  absl::FlagSaver restore_flags;
  absl::SetFlag(&FLAGS_retain_finished_mib, 0);
  absl::SetFlag(&FLAGS_finished_grace_s, 0);
  ServerConfig config;
  std::string window_reason;
  ASSERT_TRUE(ApplyIngestFlags(config, &window_reason).ok());
  EXPECT_EQ(config.retain_finished_bytes, 0u);
  EXPECT_EQ(config.finished_grace, absl::ZeroDuration());
}

TEST(IngestFlagsTest, ANegativeBoundIsRefusedNamingItsFlag) {
  for (const char* flag : {"retain_finished_mib", "finished_grace_s"}) {
    absl::FlagSaver restore_flags;
    if (std::string(flag) == "retain_finished_mib") {
      absl::SetFlag(&FLAGS_retain_finished_mib, -1);
    } else {
      absl::SetFlag(&FLAGS_finished_grace_s, -1);
    }
    ServerConfig config;
    std::string window_reason;
    const absl::Status status = ApplyIngestFlags(config, &window_reason);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(status.message(), HasSubstr(std::string("--") + flag + " must be >= 0")) << flag;
  }
}

}  // namespace
}  // namespace fedagg
