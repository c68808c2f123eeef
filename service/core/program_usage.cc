// --help for fedagg's programs: Abseil's usage configuration pointed at fedagg's files.
#include "service/core/program_usage.h"

#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"

namespace fedagg {
namespace {

// FEDAGG_SOURCE_ROOT: the source tree's absolute path with a trailing slash (CMake).
constexpr absl::string_view kSourceRoot = FEDAGG_SOURCE_ROOT;

bool IsFedaggFile(absl::string_view normalized_filename) {
  return !absl::StartsWith(normalized_filename, "/") && !absl::StrContains(normalized_filename, "absl/");
}

}  // namespace

void SetProgramUsage(absl::string_view usage_message) {
  absl::FlagsUsageConfig config;
  config.normalize_filename = [](absl::string_view filename) {
    absl::ConsumePrefix(&filename, kSourceRoot);
    return std::string(filename);
  };
  config.contains_helpshort_flags = IsFedaggFile;
  config.contains_help_flags = IsFedaggFile;
  config.contains_helppackage_flags = IsFedaggFile;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage_message);
}

std::vector<char*> ParseProgramCommandLine(int argc, char* argv[]) {
  // Abseil's own parse, with its usage handling moved here (the internal API it is built
  // on: the public ParseCommandLine would std::exit(1) after a help).
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage, absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return positional;
}

}  // namespace fedagg
