// The interface between fedagg-server and the cuda backend built as a plugin
// (libfedagg_backend_cuda.so, cuda/cuda_backend_plugin.cc): the one symbol the plugin
// exports returns this table. The server links no CUDA library; it loads the plugin with
// dlopen (backend_plugin_loader.h) only when the cuda backend is wanted, so the same binary
// starts on hosts without CUDA. The plugin and the server come from the same build: the
// table carries C++ types, and a plugin of another version is refused.
#ifndef FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_H_
#define FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

// Raised whenever the table or the types it carries change.
inline constexpr int kBackendPluginVersion = 5;

struct BackendPlugin {
  int version = kBackendPluginVersion;  // the plugin's build's kBackendPluginVersion
  // The process-wide backend with these staging options on `devices` (nullopt: every
  // device), as cuda/cuda_backend.h's CudaBackend: UNAVAILABLE, with the runtime's reason,
  // on a machine without a usable device. `host` is the server's CPU backend: the plugin
  // links its own copy of fedagg's core, and what it does on the host's cores (exact sums,
  // checks of partials) must use the server's thread pool and memory, not that copy's.
  absl::StatusOr<const AccumulatorFactory*> (*backend)(const AccumulatorFactory& host,
                                                        const portable::StagingRingOptions& staging,
                                                        const std::optional<std::vector<int>>& devices) = nullptr;
};

// The name of the function a plugin exports: `const BackendPlugin* fedagg_backend_plugin()`.
inline constexpr char kBackendPluginSymbol[] = "fedagg_backend_plugin";
// The cuda plugin's file name, looked for beside the program unless --cuda_plugin names it.
inline constexpr char kCudaPluginFileName[] = "libfedagg_backend_cuda.so";

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_H_
