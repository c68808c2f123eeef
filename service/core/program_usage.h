// How fedagg's programs describe themselves on --help: the usage message, then every flag
// the program defines in fedagg's own source files, grouped by file, with its default.
// (Abseil's default lists only flags defined in a file named after the binary, so
// without this fedagg-server --help printed no flag at all.)
#ifndef FEDAGG_SERVICE_CORE_PROGRAM_USAGE_H_
#define FEDAGG_SERVICE_CORE_PROGRAM_USAGE_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace fedagg {

// Sets the program's usage message and makes --help and --helpshort list fedagg's flags,
// each file named relative to the source tree. Call before absl::ParseCommandLine.
void SetProgramUsage(absl::string_view usage_message);

// absl::ParseCommandLine, except that a help asked for (--help, --helpshort, --helpfull,
// --version, ...) ends the program with status 0 after printing it, as a person or a
// script expects of a help that worked (Abseil's own parse exits 1). Returns the
// positional arguments, argv[0] first.
std::vector<char*> ParseProgramCommandLine(int argc, char* argv[]);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_PROGRAM_USAGE_H_
