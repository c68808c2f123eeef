// Whole-file reads.
#include "service/core/read_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace fedagg {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read file '", path, "'"));
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace fedagg
