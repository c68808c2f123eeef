// Backend choice: which backends this build has, and whether a GPU is there.
#include "service/backend/backend_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "portable/staging_ring.h"
#include "service/core/cpu_accumulator_factory.h"
#if FEDAGG_HAVE_THRUST_OMP
#include "portable/omp_backend.h"
#endif
#if FEDAGG_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace fedagg {

std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names = {"cpu"};
#if FEDAGG_HAVE_THRUST_OMP
  names.push_back("thrust-omp");
#endif
#if FEDAGG_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

absl::StatusOr<BackendChoice> ChooseBackend(absl::string_view name, const BackendOptions& options) {
  if (options.staging_slots < 1 || options.staging_slots > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--staging_slots must be between 1 and 1024, not ", options.staging_slots));
  }
  if (options.staging_slot_bytes < (uint64_t{1} << 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a staging slot must hold at least 64 KiB (--staging_slot_mib >= 1), not ", options.staging_slot_bytes,
        " bytes"));
  }
  portable::StagingRingOptions staging;
  staging.slots = options.staging_slots;
  staging.slot_bytes = static_cast<size_t>(options.staging_slot_bytes);
  const DeviceSelection& devices = options.devices;
  const std::string devices_flag = absl::StrCat("--devices=", DeviceSelectionName(devices));
  if (name == "cpu") {
    if (devices.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          devices_flag, ": the cpu backend reduces in host memory and has no devices; leave --devices=all"));
    }
    return BackendChoice{&CpuAccumulatorFactory::Default(), "cpu: chosen by --backend=cpu"};
  }
  if (name == "thrust-omp") {
#if FEDAGG_HAVE_THRUST_OMP
    if (devices.has_value() && devices->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(devices_flag, ": name at least one device"));
    }
    const int simulated = devices.has_value() ? static_cast<int>(devices->size()) : 1;
    return BackendChoice{&ThrustOmpBackend(staging, simulated),
                         simulated == 1 ? std::string("thrust-omp: chosen by --backend=thrust-omp")
                                        : absl::StrCat("thrust-omp: chosen by --backend=thrust-omp, on ",
                                                       simulated, " simulated devices (", devices_flag,
                                                       ", a test aid)")};
#else
    return absl::FailedPreconditionError(
        "--backend=thrust-omp: this build has no thrust-omp backend (configure with the CUDA "
        "toolkit's Thrust headers and OpenMP present)");
#endif
  }
  if (name == "cuda" || name == "auto") {
#if FEDAGG_HAVE_CUDA
    absl::StatusOr<const AccumulatorFactory*> cuda = cuda::CudaBackend(staging, devices);
    if (cuda.ok()) {
      return BackendChoice{*cuda, absl::StrCat(name == "cuda" ? "cuda: chosen by --backend=cuda"
                                                              : "cuda: --backend=auto found a CUDA device",
                                               ", ", devices_flag)};
    }
    if (cuda.status().code() != absl::StatusCode::kUnavailable) {
      return absl::Status(cuda.status().code(), absl::StrCat(devices_flag, ": ", cuda.status().message()));
    }
    if (name == "cuda" || devices.has_value()) {
      return absl::UnavailableError(absl::StrCat(
          "--backend=", name, ": no usable CUDA device on this machine (", cuda.status().message(),
          "); use --backend=cpu", devices.has_value() ? " with --devices=all" : " or --backend=auto"));
    }
    return BackendChoice{&CpuAccumulatorFactory::Default(),
                         absl::StrCat("cpu: --backend=auto found no CUDA device (",
                                      cuda.status().message(), ")")};
#else
    if (name == "cuda") {
      return absl::FailedPreconditionError(
          "--backend=cuda: this fedagg-server was built without CUDA (FEDAGG_WITH_CUDA=OFF); "
          "use --backend=cpu or --backend=auto");
    }
    if (devices.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          devices_flag, ": --backend=auto has no CUDA backend in this build to give devices to; "
          "leave --devices=all"));
    }
    return BackendChoice{&CpuAccumulatorFactory::Default(),
                         "cpu: --backend=auto, and this build has no CUDA backend"};
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("--backend must be auto or one of ",
                                                 absl::StrJoin(BuiltBackends(), ", "),
                                                 ", not '", name, "'"));
}

}  // namespace fedagg
