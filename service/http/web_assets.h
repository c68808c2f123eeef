// The files the HTTP path serves as they are: the JavaScript client (/fedagg.mjs) and the
// example page (/examples/logistic-regression/...), built into the server from
// client_stub/js by cmake/EmbedWebAssets.cmake (service/http/CMakeLists.txt lists them).
#ifndef FEDAGG_SERVICE_HTTP_WEB_ASSETS_H_
#define FEDAGG_SERVICE_HTTP_WEB_ASSETS_H_

#include <string_view>

#include "absl/types/span.h"

namespace fedagg {

struct WebAsset {
  std::string_view path;          // the URL path it is served at
  std::string_view content_type;
  std::string_view content;
};

absl::Span<const WebAsset> WebAssets();

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_WEB_ASSETS_H_
