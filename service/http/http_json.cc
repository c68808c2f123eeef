// JSON bodies and HttpError answers of the HTTP path.
#include "service/http/http_json.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "fedagg/v1/upload.pb.h"

namespace fedagg {

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;  // INTERNAL, UNKNOWN, DATA_LOSS
  }
}

void AnswerJson(httplib::Response& response, const google::protobuf::Message& message, int http_status) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    AnswerError(response, absl::InternalError("the answer could not be written as JSON"));
    return;
  }
  response.status = http_status;
  response.set_content(json, "application/json");
}

void AnswerError(httplib::Response& response, const absl::Status& status, std::optional<uint64_t> committed_size,
                 int http_status) {
  v1::HttpError error;
  error.set_code(absl::StatusCodeToString(status.code()));
  error.set_message(std::string(status.message()));
  if (committed_size.has_value()) error.set_committed_size(*committed_size);
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(error, &json);
  response.status = http_status != 0 ? http_status : HttpStatusOf(status.code());
  response.set_content(json, "application/json");
}

absl::Status ParseJson(const std::string& body, const std::string& what, google::protobuf::Message* message) {
  const google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(body, message);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the body is not a JSON ", what, ": ", std::string(parsed.message())));
  }
  return absl::OkStatus();
}

}  // namespace fedagg
