// Whole files in and out: reads one into a string (PEM material, tokens, flag files),
// writes one from bytes (results the command-line client saves).
#ifndef FEDAGG_SERVICE_CORE_READ_FILE_H_
#define FEDAGG_SERVICE_CORE_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedagg {

// NOT_FOUND naming the path when it cannot be read.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Creates or replaces `path` with `bytes`. The error says why, from errno: NOT_FOUND when
// the directory does not exist, PERMISSION_DENIED when it may not be written, DATA_LOSS
// when the write itself fails (a full disk).
absl::Status WriteFile(const std::string& path, absl::string_view bytes);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_READ_FILE_H_
