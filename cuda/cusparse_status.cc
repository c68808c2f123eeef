// cuSPARSE errors as absl::Status.
#include "cuda/cusparse_status.h"

#include "absl/strings/str_cat.h"

namespace fedagg::cuda {

absl::Status CusparseStatus(cusparseStatus_t status, absl::string_view call) {
  const std::string message = absl::StrCat(call, " failed: ", cusparseGetErrorString(status));
  switch (status) {
    case CUSPARSE_STATUS_ALLOC_FAILED:
    case CUSPARSE_STATUS_INSUFFICIENT_RESOURCES:
      return absl::ResourceExhaustedError(message);
    case CUSPARSE_STATUS_NOT_INITIALIZED:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace fedagg::cuda
