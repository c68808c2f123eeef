// The calling thread's reduction stream (thread-local).
#include "cuda/reduction_stream.h"

namespace fedagg::cuda {
namespace {
thread_local cudaStream_t bound_stream = nullptr;
}  // namespace

cudaStream_t CurrentReductionStream() { return bound_stream; }

void BindReductionStream(cudaStream_t stream) { bound_stream = stream; }

}  // namespace fedagg::cuda
