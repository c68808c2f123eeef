// The device probe answers on every machine: a count on a GPU machine, UNAVAILABLE
// (not a crash, not INTERNAL) on one without a driver or device.
#include "cuda/device_probe.h"

#include "gtest/gtest.h"

namespace fedagg::cuda {
namespace {

TEST(DeviceProbeTest, ReportsDevicesOrUnavailable) {
  absl::StatusOr<int> devices = UsableDeviceCount();
  if (devices.ok()) {
    EXPECT_GE(*devices, 1);
  } else {
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable) << devices.status();
    EXPECT_FALSE(devices.status().message().empty());
  }
}

}  // namespace
}  // namespace fedagg::cuda
