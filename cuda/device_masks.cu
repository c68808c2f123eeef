// The portable mask expansion on a CUDA device: copy in, expand, copy out.
#include <thrust/system/cuda/execution_policy.h>

#include <vector>

#include "cuda/cuda_resources.h"
#include "cuda/cuda_status.h"
#include "cuda/device_masks.h"
#include "portable/thrust_mask_accumulator.h"

namespace fedagg::cuda {
namespace {

absl::Status AddMasksOnCurrentDevice(absl::Span<const SignedMaskSeed> seeds, uint32_t field,
                                     absl::Span<uint32_t> total) {
  const std::vector<portable::SignedChaCha20Key> keys = portable::SignedChaCha20Keys(seeds);
  const size_t key_bytes = keys.size() * sizeof(keys[0]);
  const size_t total_bytes = total.size() * sizeof(uint32_t);
  absl::StatusOr<DeviceMemory> device_keys = AllocateDevice(key_bytes);
  if (!device_keys.ok()) return device_keys.status();
  absl::StatusOr<DeviceMemory> device_total = AllocateDevice(total_bytes);
  if (!device_total.ok()) return device_total.status();
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpy(device_keys->get(), keys.data(), key_bytes, cudaMemcpyHostToDevice));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpy(device_total->get(), total.data(), total_bytes, cudaMemcpyHostToDevice));
  portable::AddSeedMasks(thrust::cuda::par, static_cast<const portable::SignedChaCha20Key*>(device_keys->get()),
                         keys.size(), field, static_cast<uint32_t*>(device_total->get()), total.size());
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemcpy(total.data(), device_total->get(), total_bytes, cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

}  // namespace

absl::Status AddMasksOnDevice(int device, absl::Span<const SignedMaskSeed> seeds, uint32_t field,
                              absl::Span<uint32_t> total) {
  if (seeds.empty() || total.empty()) return absl::OkStatus();
  int previous = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  const absl::Status added = AddMasksOnCurrentDevice(seeds, field, total);
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(previous));  // the calling thread's device, as it was
  return added;
}

}  // namespace fedagg::cuda
