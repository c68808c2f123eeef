// Whole-file reads and writes.
#include "service/core/read_file.h"

#include <cerrno>
#include <cstring>
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

absl::Status WriteFile(const std::string& path, absl::string_view bytes) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int error = errno;
    const std::string why = absl::StrCat("cannot write '", path, "': ", std::strerror(error));
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(why, "; create its directory first"));
    }
    if (error == EACCES || error == EPERM || error == EROFS) return absl::PermissionDeniedError(why);
    return absl::InternalError(why);
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("failed writing '", path, "': ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace fedagg
