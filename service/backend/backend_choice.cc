// Backend choice: which backends this build has, whether a GPU is there, and the cuda plugin.
#include "service/backend/backend_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "portable/staging_ring.h"
#include "service/backend/backend_plugin_loader.h"
#include "service/backend/cuda_driver_probe.h"
#include "service/core/cpu_accumulator_factory.h"
#if FEDAGG_HAVE_THRUST_OMP
#include "portable/omp_backend.h"
#endif

namespace fedagg {

std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names = {"cpu"};
#if FEDAGG_HAVE_THRUST_OMP
  names.push_back("thrust-omp");
#endif
  names.push_back("cuda");
  return names;
}

namespace {

// cuda, or auto: the driver is asked first (auto only), so that a host without a GPU loads
// no CUDA library; then the plugin, then its devices. auto falls back to cpu, saying why,
// unless devices were named.
absl::StatusOr<BackendChoice> ChooseCuda(absl::string_view name, const portable::StagingRingOptions& staging,
                                         const BackendOptions& options) {
  const DeviceSelection& devices = options.devices;
  const std::string devices_flag = absl::StrCat("--devices=", DeviceSelectionName(devices));
  const bool automatic = name == "auto";
  auto fall_back = [&](const absl::Status& why) -> absl::StatusOr<BackendChoice> {
    if (devices.has_value()) {
      return absl::Status(why.code(), absl::StrCat("--backend=auto with ", devices_flag, ": ", why.message(),
                                                   "; use --backend=cpu with --devices=all"));
    }
    return BackendChoice{&CpuAccumulatorFactory::Default(),
                         absl::StrCat("cpu: --backend=auto has no CUDA device to use (", why.message(), ")")};
  };
  if (automatic) {
    if (absl::StatusOr<int> driver = CudaDriverDeviceCount(); !driver.ok()) return fall_back(driver.status());
  }
  absl::StatusOr<const BackendPlugin*> plugin = LoadBackendPlugin(CudaPluginPath(options.cuda_plugin));
  if (!plugin.ok()) {
    if (automatic) return fall_back(plugin.status());
    return absl::FailedPreconditionError(
        absl::StrCat("--backend=cuda: ", plugin.status().message(), "; or use --backend=cpu or --backend=auto"));
  }
  absl::StatusOr<const AccumulatorFactory*> cuda =
      (*plugin)->backend(CpuAccumulatorFactory::Default(), staging, devices);
  if (cuda.ok()) {
    return BackendChoice{*cuda, absl::StrCat(automatic ? "cuda: --backend=auto found a CUDA device"
                                                       : "cuda: chosen by --backend=cuda",
                                             ", ", devices_flag)};
  }
  if (cuda.status().code() != absl::StatusCode::kUnavailable) {
    return absl::Status(cuda.status().code(), absl::StrCat(devices_flag, ": ", cuda.status().message()));
  }
  if (automatic) return fall_back(cuda.status());
  return absl::UnavailableError(absl::StrCat("--backend=cuda: no usable CUDA device on this machine (",
                                             cuda.status().message(), "); use --backend=cpu",
                                             devices.has_value() ? " with --devices=all" : " or --backend=auto"));
}

}  // namespace

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
  if (name == "cuda" || name == "auto") return ChooseCuda(name, staging, options);
  return absl::InvalidArgumentError(absl::StrCat("--backend must be auto or one of ",
                                                 absl::StrJoin(BuiltBackends(), ", "),
                                                 ", not '", name, "'"));
}

}  // namespace fedagg
