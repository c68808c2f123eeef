// GPU benchmark: what the CUDA backend achieves against what the hardware can do.
//   reduction   the dense batched-sum kernel over a device-resident [B, D] float32 batch,
//               against a device-to-device copy of the same bytes (HBM bandwidth); the
//               same batch quantized to 8 and 4 bits, decoded as it is added (the staged
//               reducer's fused pass), against the same copy for the bytes it moves; a
//               rotated result rotated back (runs of 1,024 and 8,192), against a copy of
//               the result;
//   backend     PartialAggregate::AccumulateBatch on the cuda backend, end to end (the
//               plan, the async copies of each update's span, the kernels), from update
//               buffers as the server receives them (LargeAllocation mappings pinned by
//               the backend's pinner) and from pageable memory, each with the ring's
//               copies alone (device-timed), against pinned cudaMemcpy;
//   copies      host-to-device cudaMemcpy from pageable memory, against pinned memory
//               (cudaHostAlloc), the same bytes (PCIe / NVLink bandwidth);
//   sparse      sparse_sum at 1% density through the cuda backend: float32 values take
//               the CSR + cuSPARSE path, int32 values (same bytes, int64 accumulator)
//               sort and segment (docs/GPU.md), with sorted and with shuffled indices;
//               end to end (AccumulateBatch from host memory), and the kernels alone (the
//               staged reducer on a batch already in device memory, in the staging layout).
// Exits with status 77 and a message when there is no CUDA device. Run it on a GPU
// machine (docs/GPU.md); figures go to docs/BENCHMARKS.md with the device named.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_reducers.h"
#include "cuda/cuda_resources.h"
#include "cuda/cuda_status.h"
#include "cuda/dense_sum_kernel.h"
#include "cuda/device_probe.h"
#include "monitoring/metrics_registry.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/large_allocation.h"
#include "service/core/partial_aggregate.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {
namespace {

constexpr int64_t kRows = 16;             // updates per batch (--batch_size default)
constexpr int64_t kColumns = 16 << 20;    // 16 Mi float32 per update: 64 MiB
constexpr int kRepeats = 10;

// Seconds per call of `enqueue` on `stream`, timed with events over kRepeats calls.
absl::StatusOr<double> TimeOnDevice(cudaStream_t stream, const std::function<absl::Status()>& enqueue) {
  FEDAGG_RETURN_IF_ERROR(enqueue());  // warm-up
  absl::StatusOr<CudaEvent> start = CreateEvent();
  absl::StatusOr<CudaEvent> stop = CreateEvent();
  if (!start.ok()) return start.status();
  if (!stop.ok()) return stop.status();
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventRecord(start->get(), stream));
  for (int i = 0; i < kRepeats; ++i) FEDAGG_RETURN_IF_ERROR(enqueue());
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop->get(), stream));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop->get()));
  float ms = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start->get(), stop->get()));
  return ms / 1e3 / kRepeats;
}

void Row(const char* what, double bytes, double seconds, double baseline_gbps) {
  const double gbps = bytes / seconds / 1e9;
  if (baseline_gbps > 0) {
    std::printf("%-52s %9.1f GB/s  (%5.1f%% of the baseline above)\n", what, gbps, 100 * gbps / baseline_gbps);
  } else {
    std::printf("%-52s %9.1f GB/s\n", what, gbps);
  }
}

// Seconds per PartialAggregate::AccumulateBatch of `views` on the cuda backend, end to
// end: after one batch that allocates the accumulator and the staging slots, kRepeats
// batches and the Serialize that waits for their reductions (and copies the accumulator
// back once).
absl::StatusOr<double> TimeBackendBatch(const std::shared_ptr<const ReductionSpec>& spec,
                                        const std::vector<UpdateView>& views) {
  FEDAGG_ASSIGN_OR_RETURN(const AccumulatorFactory* backend, CudaBackend(CpuAccumulatorFactory::Default()));
  PartialAggregate partial(spec, *backend);
  FEDAGG_RETURN_IF_ERROR(partial.AccumulateBatch(views));
  FEDAGG_RETURN_IF_ERROR(partial.Serialize().status());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) FEDAGG_RETURN_IF_ERROR(partial.AccumulateBatch(views));
  FEDAGG_RETURN_IF_ERROR(partial.Serialize().status());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats;
}

// A host array copied into device memory it owns.
template <typename T>
absl::StatusOr<DeviceMemory> OnDevice(const std::vector<T>& host) {
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device, AllocateDevice(host.size() * sizeof(T)));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpy(device.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

// Seconds per staged reduction (the kernels alone: no packing, no copy from the host) of
// sparse_sum over `indices` (one vector per update) with values of 1 of type In, by the
// reducer the cuda backend makes for it: Acc float takes CSR + cuSPARSE, int64 (int32
// values) sort and segment. Each Accumulate returns once its kernels are done.
template <typename Acc, typename In>
absl::StatusOr<double> TimeStagedSparseSum(const std::vector<std::vector<int64_t>>& indices,
                                           portable::StagedReducerMaker<Acc> make) {
  std::vector<int64_t> all_indices, offsets = {0};
  for (size_t u = 0; u < indices.size(); ++u) {
    all_indices.insert(all_indices.end(), indices[u].begin(), indices[u].end());
    offsets.push_back(static_cast<int64_t>(all_indices.size()));
  }
  const std::vector<In> values(all_indices.size(), In{1});
  const std::vector<double> weights(indices.size(), 1.0);
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_indices, OnDevice(all_indices));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_offsets, OnDevice(offsets));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_values, OnDevice(values));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_weights, OnDevice(weights));
  portable::StagedBatch batch;
  batch.updates = static_cast<int64_t>(indices.size());
  batch.entries = static_cast<int64_t>(all_indices.size());
  batch.values = device_values.get();
  batch.indices = static_cast<const int64_t*>(device_indices.get());
  batch.update_offsets = static_cast<const int64_t*>(device_offsets.get());
  batch.weights = static_cast<const double*>(device_weights.get());
  portable::ReducerSpec spec;
  spec.kind = portable::ReducerKind::kScatter;
  spec.in = std::is_same_v<In, float> ? portable::InType::kF32 : portable::InType::kI32;
  spec.rows = kColumns;
  const std::unique_ptr<portable::StagedFieldReducer<Acc>> reducer = make(spec);
  const auto accumulate = [&]() -> absl::Status {
    const portable::Outcome outcome = reducer->Accumulate(batch);
    return outcome.ok() ? absl::OkStatus() : absl::InternalError(outcome.message);
  };
  FEDAGG_RETURN_IF_ERROR(accumulate());  // allocates the accumulator and the work arrays
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) FEDAGG_RETURN_IF_ERROR(accumulate());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats;
}

// Seconds per staged reduction (the kernels alone, the batch already on the device) of a
// dense sum of kRows updates quantized to `bits` bits in blocks of 256: the fused pass that
// unpacks each code, scales it and adds it (portable/thrust_reducer_functors.h,
// DenseQuantizedColumns). The bytes it moves: the codes and scales read once, the
// accumulator read and written once.
absl::StatusOr<std::pair<double, double>> TimeStagedQuantizedSum(int bits) {
  portable::ReducerSpec spec;
  spec.kind = portable::ReducerKind::kDense;
  spec.row_width = kColumns;
  spec.quantized_bits = bits;
  spec.block = 256;
  const int64_t row_code_bytes = portable::QuantizedRowBytes(spec, kColumns);
  const int64_t row_blocks = portable::QuantizedRowBlocks(spec, kColumns);
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(static_cast<size_t>(kRows * row_code_bytes));
  for (uint8_t& code : codes) code = static_cast<uint8_t>(rng());
  const std::vector<float> scales(static_cast<size_t>(kRows * row_blocks), 0.5f);
  const std::vector<double> weights(static_cast<size_t>(kRows), 1.0);
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_codes, OnDevice(codes));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_scales, OnDevice(scales));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device_weights, OnDevice(weights));
  portable::StagedBatch batch;
  batch.updates = kRows;
  batch.columns = kColumns;
  batch.values = device_codes.get();
  batch.scales = static_cast<const float*>(device_scales.get());
  batch.weights = static_cast<const double*>(device_weights.get());
  const std::unique_ptr<portable::StagedFieldReducer<float>> reducer = CudaReducerMakers().f32(spec);
  const auto accumulate = [&]() -> absl::Status {
    const portable::Outcome outcome = reducer->Accumulate(batch);
    return outcome.ok() ? absl::OkStatus() : absl::InternalError(outcome.message);
  };
  FEDAGG_RETURN_IF_ERROR(accumulate());  // allocates the accumulator
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) FEDAGG_RETURN_IF_ERROR(accumulate());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats;
  const double bytes = static_cast<double>(codes.size() + scales.size() * sizeof(float)) +
                       2.0 * static_cast<double>(kColumns) * sizeof(float);
  return std::make_pair(seconds, bytes);
}

// Seconds to make a dense float32 result of kColumns values on the device and copy it to
// the host (ResultRequest), rotated back in runs of `rotation` (0: not rotated; the
// staged reducer's HadamardStage and UnrotateSigns passes, in float64).
absl::StatusOr<double> TimeResult(int64_t rotation) {
  portable::ReducerSpec spec;
  spec.kind = portable::ReducerKind::kDense;
  spec.row_width = kColumns;
  const std::unique_ptr<portable::StagedFieldReducer<float>> reducer = CudaReducerMakers().f32(spec);
  std::vector<float> host(static_cast<size_t>(kColumns));
  portable::ResultRequest request;
  request.values = host.data();
  request.count = host.size();
  request.rotation = rotation;
  request.rotation_seed = 1;
  const auto save = [&]() -> absl::Status {
    const portable::Outcome outcome = reducer->SaveResult(request);
    return outcome.ok() ? absl::OkStatus() : absl::InternalError(outcome.message);
  };
  FEDAGG_RETURN_IF_ERROR(save());  // allocates the state
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) FEDAGG_RETURN_IF_ERROR(save());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats;
}

// sparse_sum of kRows updates, each touching 1% of kColumns coordinates, through the
// two paths of the dense-result sparse family: float32 (CSR + cuSPARSE) and int32 (sort
// and segment): end to end, with packing into the staging ring and its copies, and the
// kernels alone.
absl::Status SparseSum() {
  constexpr int64_t kTouched = kColumns / 100;
  std::mt19937_64 rng(1);
  std::vector<std::vector<int64_t>> sorted(kRows), shuffled(kRows);
  std::vector<int64_t> all(static_cast<size_t>(kColumns));
  std::iota(all.begin(), all.end(), int64_t{0});
  for (int64_t r = 0; r < kRows; ++r) {
    std::shuffle(all.begin(), all.end(), rng);
    shuffled[r].assign(all.begin(), all.begin() + kTouched);
    sorted[r] = shuffled[r];
    std::sort(sorted[r].begin(), sorted[r].end());
  }
  const std::vector<float> floats(static_cast<size_t>(kTouched), 1.0f);
  const std::vector<int32_t> ints(static_cast<size_t>(kTouched), 1);
  std::printf("\nsparse_sum, %lld updates x %lld of %lld coordinates (1%%), AccumulateBatch:\n",
              static_cast<long long>(kRows), static_cast<long long>(kTouched), static_cast<long long>(kColumns));
  for (const auto* indices : {&sorted, &shuffled}) {
    double seconds[2] = {0, 0};
    for (const DType dtype : {DType::kFloat32, DType::kInt32}) {
      FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<const ReductionSpec> spec,
                              ReductionSpec::Create(ValueType::Tensor(dtype, {kColumns}),
                                                    {{Intrinsic::kSparseSum, false}}));
      std::vector<UpdateView> views(static_cast<size_t>(kRows));
      for (int64_t r = 0; r < kRows; ++r) {
        views[r].fields.push_back(dtype == DType::kFloat32
                                      ? FieldValue::Sparse<float>((*indices)[r], floats)
                                      : FieldValue::Sparse<int32_t>((*indices)[r], ints));
      }
      FEDAGG_ASSIGN_OR_RETURN(seconds[dtype == DType::kInt32], TimeBackendBatch(spec, views));
    }
    std::printf("  %-8s indices: float32 CSR + cuSPARSE %8.3f ms, int32 sort and segment %8.3f ms (%.2fx)\n",
                indices == &sorted ? "sorted" : "shuffled", 1e3 * seconds[0], 1e3 * seconds[1],
                seconds[1] / seconds[0]);
  }
  std::printf("the kernels alone (the batch already on the device, staged):\n");
  const portable::StagedReducerMakers makers = CudaReducerMakers();
  for (const auto* indices : {&sorted, &shuffled}) {
    FEDAGG_ASSIGN_OR_RETURN(const double csr, (TimeStagedSparseSum<float, float>(*indices, makers.f32)));
    FEDAGG_ASSIGN_OR_RETURN(const double sort, (TimeStagedSparseSum<int64_t, int32_t>(*indices, makers.i64)));
    std::printf("  %-8s indices: float32 CSR + cuSPARSE %8.3f ms, int32 sort and segment %8.3f ms (%.2fx; goal 3x)\n",
                indices == &sorted ? "sorted" : "shuffled", 1e3 * csr, 1e3 * sort, sort / csr);
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const size_t batch_bytes = static_cast<size_t>(kRows * kColumns) * sizeof(float);
  const size_t acc_bytes = static_cast<size_t>(kColumns) * sizeof(float);
  cudaDeviceProp prop{};
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s, %.1f GiB, batch [%lld, %lld] float32 = %.0f MiB\n\n", prop.name,
              prop.totalGlobalMem / 1073741824.0, static_cast<long long>(kRows),
              static_cast<long long>(kColumns), batch_bytes / 1048576.0);
  FEDAGG_ASSIGN_OR_RETURN(CudaStream stream, CreateStream());
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory batch, AllocateDevice(batch_bytes));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory copy, AllocateDevice(batch_bytes));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory acc, AllocateDevice(acc_bytes));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(batch.get(), 0, batch_bytes, stream.get()));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(acc.get(), 0, acc_bytes, stream.get()));

  // Device memory: a copy reads and writes every byte once.
  FEDAGG_ASSIGN_OR_RETURN(double copy_s, TimeOnDevice(stream.get(), [&]() -> absl::Status {
    FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy.get(), batch.get(), batch_bytes,
                                                cudaMemcpyDeviceToDevice, stream.get()));
    return absl::OkStatus();
  }));
  const double copy_gbps = 2.0 * batch_bytes / copy_s / 1e9;
  Row("device-to-device copy (read + write)", 2.0 * batch_bytes, copy_s, 0);
  FEDAGG_ASSIGN_OR_RETURN(double sum_s, TimeOnDevice(stream.get(), [&] {
    return LaunchDenseSum(static_cast<float*>(acc.get()), static_cast<const float*>(batch.get()),
                          nullptr, kRows, kColumns, stream.get());
  }));
  Row("dense sum kernel (batch read once, accumulator r+w)", batch_bytes + 2.0 * acc_bytes, sum_s, copy_gbps);
  // Quantized updates decoded as they are added (issue 46's goal: at least 80% of the
  // device's bandwidth for the bytes the pass moves); the model bytes it stands for beside.
  for (int bits : {8, 4}) {
    FEDAGG_ASSIGN_OR_RETURN(const auto quantized, TimeStagedQuantizedSum(bits));
    const std::string what = std::to_string(bits) + "-bit quantized sum, decoded as added (staged)";
    Row(what.c_str(), quantized.second, quantized.first, copy_gbps);
    std::printf("%-52s %9.1f GB/s of float32 model\n", "", batch_bytes / quantized.first / 1e9);
  }
  // A rotated field's result rotated back on the device, once a round (issue 46's goal:
  // the transform at most 1.3x a device copy of the result, i.e. >= 77% here, for runs up
  // to 8,192): the time the result takes with it less the time without it, against a copy
  // of the result's bytes (read + write).
  FEDAGG_ASSIGN_OR_RETURN(const double plain_result_s, TimeResult(0));
  for (int64_t run : {1024, 8192}) {
    FEDAGG_ASSIGN_OR_RETURN(const double rotated_result_s, TimeResult(run));
    const std::string what = "result rotated back, runs of " + std::to_string(run) + " (transform)";
    Row(what.c_str(), 2.0 * acc_bytes, rotated_result_s - plain_result_s, copy_gbps);
  }

  // Host to device: pageable memory against pinned memory.
  std::vector<float> pageable(static_cast<size_t>(kRows * kColumns), 1.0f);
  FEDAGG_ASSIGN_OR_RETURN(PinnedMemory pinned, AllocatePinned(batch_bytes));
  std::memset(pinned.get(), 0, batch_bytes);
  FEDAGG_ASSIGN_OR_RETURN(double pinned_s, TimeOnDevice(stream.get(), [&]() -> absl::Status {
    FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(batch.get(), pinned.get(), batch_bytes,
                                                cudaMemcpyHostToDevice, stream.get()));
    return absl::OkStatus();
  }));
  const double pinned_gbps = batch_bytes / pinned_s / 1e9;
  std::printf("\n");
  Row("host-to-device cudaMemcpy from pinned memory", batch_bytes, pinned_s, 0);
  FEDAGG_ASSIGN_OR_RETURN(double pageable_s, TimeOnDevice(stream.get(), [&]() -> absl::Status {
    FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(batch.get(), pageable.data(), batch_bytes,
                                                cudaMemcpyHostToDevice, stream.get()));
    return absl::OkStatus();
  }));
  Row("host-to-device cudaMemcpy from pageable memory", batch_bytes, pageable_s, pinned_gbps);

  // The cuda backend as the service drives it: a batch of updates in, staged through the
  // ring; on device 0 alone, the device the figures above are measured on. First from
  // update buffers received as the server receives them: each its own mapping, pinned by
  // the backend's pinner while `pinned_mappings` lives (the server holds one for its life).
  FEDAGG_ASSIGN_OR_RETURN(const AccumulatorFactory* backend,
                          CudaBackend(CpuAccumulatorFactory::Default(), {}, std::vector<int>{0}));
  FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<const ReductionSpec> spec,
                          ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {kColumns}),
                                                {{Intrinsic::kFederatedSum, false}}));
  const size_t update_bytes = static_cast<size_t>(kColumns) * sizeof(float);
  const ReleasedMappings pinned_mappings(backend->host_memory_pinner(), batch_bytes);
  std::vector<LargeAllocation> received;
  for (int64_t r = 0; r < kRows; ++r) {
    received.emplace_back(update_bytes);
    std::memcpy(received.back().data(), pageable.data() + r * kColumns, update_bytes);
  }
  const auto backend_row = [&](const char* what, const auto& row_data) -> absl::Status {
    const StagingRingStats& ring = *backend->staging_rings().front();
    const uint64_t staged_before = ring.bytes_staged();
    const double copy_seconds_before = ring.copy_seconds().Read().sum;
    std::vector<UpdateView> views(static_cast<size_t>(kRows));
    for (int64_t r = 0; r < kRows; ++r) {
      views[r].fields.push_back(FieldValue::Dense<float>(absl::MakeConstSpan(row_data(r), static_cast<size_t>(kColumns))));
    }
    FEDAGG_ASSIGN_OR_RETURN(double backend_s, TimeBackendBatch(spec, views));
    Row(what, batch_bytes, backend_s, pinned_gbps);
    Row("  its staging ring's copies to the device", static_cast<double>(ring.bytes_staged() - staged_before),
        ring.copy_seconds().Read().sum - copy_seconds_before, pinned_gbps);
    return absl::OkStatus();
  };
  if (!received.front().pinned()) std::printf("(the update buffers below are not pinned: the backend has no pinner)\n");
  FEDAGG_RETURN_IF_ERROR(backend_row("cuda backend AccumulateBatch, end to end", [&](int64_t r) {
    return reinterpret_cast<const float*>(received[static_cast<size_t>(r)].data());
  }));
  FEDAGG_RETURN_IF_ERROR(backend_row("  the same from pageable memory", [&](int64_t r) {
    return pageable.data() + r * kColumns;
  }));
  return SparseSum();
}

}  // namespace
}  // namespace fedagg::cuda

int main() {
  if (absl::StatusOr<int> devices = fedagg::cuda::UsableDeviceCount(); !devices.ok()) {
    std::printf("fedagg_gpu_bench: no CUDA device on this machine, nothing to measure (%s)\n",
                std::string(devices.status().message()).c_str());
    return 77;
  }
  if (absl::Status status = fedagg::cuda::Run(); !status.ok()) {
    std::fprintf(stderr, "fedagg_gpu_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
