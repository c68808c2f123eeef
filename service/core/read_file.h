// Reads a whole file into a string (PEM material, tokens, flag files).
#ifndef FEDAGG_SERVICE_CORE_READ_FILE_H_
#define FEDAGG_SERVICE_CORE_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace fedagg {

// NOT_FOUND naming the path when it cannot be read.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_READ_FILE_H_
