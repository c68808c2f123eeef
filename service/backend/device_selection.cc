// --devices parsing.
#include "service/backend/device_selection.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace fedagg {

absl::StatusOr<DeviceSelection> ParseDeviceSelection(absl::string_view flag) {
  if (flag == "all") return DeviceSelection();
  std::vector<int> ids;
  for (absl::string_view part : absl::StrSplit(flag, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices must be 'all' or a list of device ids such as 0,2; '", part, "' in '", flag,
          "' is not a device id"));
    }
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--devices=", flag, " names device ", id, " twice"));
    }
    ids.push_back(id);
  }
  return DeviceSelection(std::move(ids));
}

std::string DeviceSelectionName(const DeviceSelection& devices) {
  return devices.has_value() ? absl::StrJoin(*devices, ",") : "all";
}

}  // namespace fedagg
