// The cuda backend's plugin entry point: libfedagg_backend_cuda.so exports only this
// function (the static libraries linked into it stay hidden), and fedagg-server reaches the
// backend through the table it returns (service/backend/backend_plugin.h).
#include "cuda/cuda_backend.h"
#include "service/backend/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const fedagg::BackendPlugin* fedagg_backend_plugin() {
  static const fedagg::BackendPlugin plugin{
      .version = fedagg::kBackendPluginVersion,
      .backend = &fedagg::cuda::CudaBackend,
  };
  return &plugin;
}
