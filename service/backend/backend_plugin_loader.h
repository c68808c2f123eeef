// Finds and loads a backend plugin (backend_plugin.h) with dlopen: once per path for the
// process's life (a backend's accumulators live as long as the process).
#ifndef FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_LOADER_H_
#define FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/backend/backend_plugin.h"

namespace fedagg {

// The cuda plugin to load: `configured` when not empty (--cuda_plugin), else
// libfedagg_backend_cuda.so in the running program's directory.
std::string CudaPluginPath(absl::string_view configured);

// The plugin at `path`; FAILED_PRECONDITION naming what is missing when there is no file
// there, when it cannot be loaded (dlerror names the library it lacks), when it exports
// no plugin table, or when it comes from another version of fedagg.
absl::StatusOr<const BackendPlugin*> LoadBackendPlugin(const std::string& path);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_BACKEND_PLUGIN_LOADER_H_
