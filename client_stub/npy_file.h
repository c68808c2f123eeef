// NumPy .npy files (format version 1.0/2.0, little-endian, C order): read into a typed
// byte buffer with its shape, and written from one, so tensors move between fedagg's CLI
// and Python with np.load / np.save. bfloat16 has no NumPy dtype and is refused.
#ifndef FEDAGG_CLIENT_STUB_NPY_FILE_H_
#define FEDAGG_CLIENT_STUB_NPY_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/core/aggregate_result.h"

namespace fedagg {

// Reads `path`; INVALID_ARGUMENT naming the file for anything but a C-order,
// little-endian float16/float32/float64/int32/int64 array.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);
// The same for the bytes of a .npy file; `name` names it in messages.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, const std::string& name);
// The bytes of a .npy file (version 1.0) holding `data`.
absl::StatusOr<std::string> EncodeNpy(DType dtype, const std::vector<int64_t>& shape, const void* data,
                                      size_t bytes);
absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      const void* data, size_t bytes);

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_NPY_FILE_H_
