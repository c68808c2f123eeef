// Plugin loading: the file, dlopen, the exported table and its version.
#include "service/backend/backend_plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <map>

#include "absl/strings/str_cat.h"
#include "service/core/mutex.h"

namespace fedagg {
namespace {

std::string ProgramDirectory() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return ".";
  const std::string program(path, static_cast<size_t>(length));
  const size_t slash = program.rfind('/');
  return slash == std::string::npos ? "." : program.substr(0, slash);
}

absl::StatusOr<const BackendPlugin*> Load(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no cuda backend plugin at ", path, " (", kCudaPluginFileName,
        " belongs beside fedagg-server, as the build and the GPU image put it; --cuda_plugin names another path)"));
  }
  // RTLD_LOCAL: the plugin's copies of fedagg's libraries stay its own.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cuda backend plugin could not be loaded: ", dlerror(),
        " (it needs the CUDA 13 runtime, cuSPARSE, nvJitLink and NCCL libraries: docs/GPU.md)"));
  }
  using Entry = const BackendPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(library, kBackendPluginSymbol));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a fedagg backend plugin (it exports no ", kBackendPluginSymbol, ")"));
  }
  const BackendPlugin* plugin = entry();
  if (plugin == nullptr || plugin->version != kBackendPluginVersion || plugin->backend == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " comes from another version of fedagg (plugin interface ", plugin == nullptr ? 0 : plugin->version,
        ", this fedagg-server has ", kBackendPluginVersion, "): install the plugin built with this server"));
  }
  return plugin;
}

}  // namespace

std::string CudaPluginPath(absl::string_view configured) {
  if (!configured.empty()) return std::string(configured);
  return absl::StrCat(ProgramDirectory(), "/", kCudaPluginFileName);
}

absl::StatusOr<const BackendPlugin*> LoadBackendPlugin(const std::string& path) {
  // A library once loaded is never unloaded; a failure is remembered too, as dlopen would
  // fail the same way again.
  static Mutex* const mutex = new Mutex();
  static auto* const loaded = new std::map<std::string, absl::StatusOr<const BackendPlugin*>>();
  MutexLock lock(mutex);
  auto found = loaded->find(path);
  if (found == loaded->end()) found = loaded->emplace(path, Load(path)).first;
  return found->second;
}

}  // namespace fedagg
