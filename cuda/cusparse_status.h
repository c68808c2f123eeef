// Turns cuSPARSE errors into absl::Status: FEDAGG_CUSPARSE_RETURN_IF_ERROR(call) returns a
// Status carrying cuSPARSE's own message. Allocation failure maps to RESOURCE_EXHAUSTED,
// a library that could not initialise (no device) to UNAVAILABLE, the rest to INTERNAL.
#ifndef FEDAGG_CUDA_CUSPARSE_STATUS_H_
#define FEDAGG_CUDA_CUSPARSE_STATUS_H_

#include <cusparse.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fedagg::cuda {

absl::Status CusparseStatus(cusparseStatus_t status, absl::string_view call);

}  // namespace fedagg::cuda

#define FEDAGG_CUSPARSE_RETURN_IF_ERROR(call)                                                  \
  do {                                                                                         \
    if (cusparseStatus_t fedagg_cusparse_status_ = (call);                                     \
        fedagg_cusparse_status_ != CUSPARSE_STATUS_SUCCESS)                                    \
      return ::fedagg::cuda::CusparseStatus(fedagg_cusparse_status_, #call);                   \
  } while (false)

#endif  // FEDAGG_CUDA_CUSPARSE_STATUS_H_
