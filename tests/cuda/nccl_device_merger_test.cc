// NcclDeviceMerger: per-device cuda reducers summed into the first device with NCCL give
// the state the host merger gives (needs two or more GPUs); reducers that are not bound to
// the group's devices are refused before any CUDA call (runs everywhere).
#include "cuda/nccl_device_merger.h"

#include <memory>
#include <numeric>
#include <vector>

#include "cuda/cuda_copy_engine.h"
#include "cuda/cuda_reducers.h"
#include "cuda/device_bound_reducer.h"
#include "gtest/gtest.h"
#include "portable/cpu_copy_engine.h"
#include "portable/host_device_merger.h"
#include "portable/ring_field_reducer.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

using portable::FieldReducer;
using portable::HostState;
using portable::Outcome;
using portable::ReducerSpec;

using Reducers = std::vector<std::unique_ptr<FieldReducer<double>>>;

// sparse_weighted_mean's state: a [16, 4] table, per-row counts and weight sums.
const ReducerSpec kSpec{portable::ReducerKind::kScatter, portable::ReducerOp::kWeightedSum,
                        portable::InType::kF32, 16, 4, true, true};

TEST(NcclDeviceMergerTest, RefusesReducersNotBoundToTheGroupsDevices) {
  absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create({0});  // no NCCL call
  ASSERT_TRUE(group.ok()) << group.status();
  // Refused before any copy or reduction, so a ring on the CPU engine is enough here.
  portable::StagingRing ring(std::make_unique<portable::CpuCopyEngine>(), portable::StagingRingOptions{});
  const portable::ReducerMakers cuda = portable::RingReducerMakers(ring, CudaReducerMakers());
  const NcclDeviceMerger<double> merger(std::shared_ptr<DeviceGroup>(*std::move(group)), cuda.f64);
  Reducers unbound;
  unbound.push_back(cuda.f64(kSpec));
  EXPECT_EQ(merger.SumIntoFirst(kSpec, unbound).code, Outcome::Code::kInternal);
  Reducers elsewhere;
  elsewhere.push_back(BindToDevice(1, cuda).f64(kSpec));
  EXPECT_EQ(merger.SumIntoFirst(kSpec, elsewhere).code, Outcome::Code::kInternal);
}

// Device d's reducer gets one update: rows {d, d + 1, 3} with values d + 1, weight d + 2.
void Feed(FieldReducer<double>& reducer, int d) {
  const std::vector<int64_t> rows = {d % 16, (d + 1) % 16, 3};
  const std::vector<float> values(rows.size() * 4, static_cast<float>(d + 1));
  const int64_t* indices[] = {rows.data()};
  const int64_t entries[] = {static_cast<int64_t>(rows.size())};
  const void* data[] = {values.data()};
  const double weights[] = {static_cast<double>(d + 2)};
  const Outcome fed = reducer.Accumulate(portable::HostBatch{1, indices, entries, data, weights});
  ASSERT_TRUE(fed.ok()) << fed.message;
}

TEST(NcclDeviceMergerTest, SumsEveryDeviceLikeTheHostMerger) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const int count = *UsableDeviceCount();
  if (count < 2) GTEST_SKIP() << "needs two or more CUDA devices for NCCL, found " << count;
  std::vector<int> devices(static_cast<size_t>(count));
  std::iota(devices.begin(), devices.end(), 0);
  absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create(devices);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::unique_ptr<portable::StagingRing>> rings;
  std::vector<portable::ReducerMaker<double>> makers;
  for (int device : devices) {
    absl::StatusOr<std::unique_ptr<CudaCopyEngine>> engine = CudaCopyEngine::Create(device);
    ASSERT_TRUE(engine.ok()) << engine.status();
    portable::StagingRingOptions options;
    options.device = device;
    rings.push_back(std::make_unique<portable::StagingRing>(*std::move(engine), options));
    makers.push_back(BindToDevice(device, portable::RingReducerMakers(*rings.back(), CudaReducerMakers())).f64);
  }
  Reducers with_nccl, through_host;
  for (size_t d = 0; d < devices.size(); ++d) {
    with_nccl.push_back(makers[d](kSpec));
    through_host.push_back(makers[d](kSpec));
    Feed(*with_nccl.back(), static_cast<int>(d));
    Feed(*through_host.back(), static_cast<int>(d));
  }
  const NcclDeviceMerger<double> nccl(std::shared_ptr<DeviceGroup>(*std::move(group)), makers[0]);
  const Outcome summed = nccl.SumIntoFirst(kSpec, with_nccl);
  ASSERT_TRUE(summed.ok()) << summed.message;
  const Outcome host_summed = portable::HostDeviceMerger<double>(makers[0]).SumIntoFirst(kSpec, through_host);
  ASSERT_TRUE(host_summed.ok()) << host_summed.message;
  HostState<double> nccl_state, host_state;
  ASSERT_TRUE(with_nccl[0]->Save(&nccl_state).ok());
  ASSERT_TRUE(through_host[0]->Save(&host_state).ok());
  EXPECT_EQ(nccl_state.values, host_state.values);
  EXPECT_EQ(nccl_state.counts, host_state.counts);
  EXPECT_EQ(nccl_state.weight_sums, host_state.weight_sums);
  EXPECT_EQ(nccl_state.counts[3], count) << "every device touched row 3 once";
}

}  // namespace
}  // namespace fedagg::cuda
