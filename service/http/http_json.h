// The HTTP path's bodies: fedagg.v1 messages as JSON (the proto3 JSON mapping), and every
// refusal as an HttpError under the HTTP status of its gRPC code (docs/PROTOCOL.md 4a).
#ifndef FEDAGG_SERVICE_HTTP_HTTP_JSON_H_
#define FEDAGG_SERVICE_HTTP_HTTP_JSON_H_

#include <google/protobuf/message.h>
#include <httplib.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace fedagg {

// The HTTP status a refusal with `code` answers with.
int HttpStatusOf(absl::StatusCode code);

// `message` as JSON, every field printed (zeros and empty ones too).
void AnswerJson(httplib::Response& response, const google::protobuf::Message& message, int http_status = 200);
// An HttpError for `status` (not OK), with the upload's committed size when there is one.
void AnswerError(httplib::Response& response, const absl::Status& status,
                 std::optional<uint64_t> committed_size = std::nullopt, int http_status = 0);

// `body` (JSON) into `message`; INVALID_ARGUMENT naming `what` when it is not one.
absl::Status ParseJson(const std::string& body, const std::string& what, google::protobuf::Message* message);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_HTTP_JSON_H_
