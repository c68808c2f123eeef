// Test helper: skips the current test, saying why, when no CUDA device is usable.
#ifndef FEDAGG_TESTS_CUDA_GPU_TEST_SUPPORT_H_
#define FEDAGG_TESTS_CUDA_GPU_TEST_SUPPORT_H_

#include "cuda/device_probe.h"
#include "gtest/gtest.h"

#define FEDAGG_SKIP_WITHOUT_GPU()                                                        \
  do {                                                                                   \
    if (absl::StatusOr<int> fedagg_devices_ = ::fedagg::cuda::UsableDeviceCount();       \
        !fedagg_devices_.ok())                                                           \
      GTEST_SKIP() << "needs a CUDA device: " << fedagg_devices_.status().message();     \
  } while (false)

#endif  // FEDAGG_TESTS_CUDA_GPU_TEST_SUPPORT_H_
