// Flag values: range checks and token files.
#include "service/flags/flag_values.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/core/read_file.h"

namespace fedagg {

absl::StatusOr<uint64_t> NonNegativeFlag(absl::string_view name, int64_t value) {
  if (value < 0) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= 0, not ", value));
  return static_cast<uint64_t>(value);
}

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  std::vector<std::string> tokens;
  if (path.empty()) return tokens;
  absl::StatusOr<std::string> content = ReadFile(path);
  if (!content.ok()) return content.status();
  for (absl::string_view line : absl::StrSplit(*content, '\n', absl::SkipWhitespace())) {
    tokens.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return tokens;
}

}  // namespace fedagg
