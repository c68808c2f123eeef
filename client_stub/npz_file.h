// NumPy .npz files: a zip archive of .npy members, as numpy.savez writes it (members
// stored, not compressed). Read into tensors by member name (the name less ".npy"), and
// written from named .npy encodings. Archives of numpy.savez_compressed (deflate) are
// refused with a message saying to use numpy.savez.
#ifndef FEDAGG_CLIENT_STUB_NPZ_FILE_H_
#define FEDAGG_CLIENT_STUB_NPZ_FILE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/aggregate_result.h"

namespace fedagg {

// Every member of `path`; INVALID_ARGUMENT naming the file and member for anything that is
// not a stored (uncompressed), unencrypted member holding a .npy that ReadNpy accepts.
absl::StatusOr<std::map<std::string, Tensor>> ReadNpz(const std::string& path);
// Writes `members` (name without ".npy", the bytes of a .npy file) as a stored zip archive.
absl::Status WriteNpz(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members);

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_NPZ_FILE_H_
