// Reading fedagg-server's flag values: sizes that must not be negative, and files of
// bearer tokens.
#ifndef FEDAGG_SERVICE_FLAGS_FLAG_VALUES_H_
#define FEDAGG_SERVICE_FLAGS_FLAG_VALUES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedagg {

// `value` as unsigned; INVALID_ARGUMENT "--<name> must be >= 0" when it is negative.
absl::StatusOr<uint64_t> NonNegativeFlag(absl::string_view name, int64_t value);

// The tokens of a file, one per line, blank lines skipped; none for an empty path.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_FLAGS_FLAG_VALUES_H_
