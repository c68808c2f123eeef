// The HTTP path's routes: tasks, resumable uploads, aggregation status, results, files.
#include "service/http/http_api.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "service/http/http_json.h"
#include "service/http/web_assets.h"
#include "service/rpc/result_stream.h"

namespace fedagg {
namespace {

// How long a start waits for the ingest window, and a submit for its count, before
// answering WAITING or COUNTING (the client asks again).
constexpr absl::Duration kAnswerWait = absl::Seconds(10);
constexpr int kMaxTasks = 64;

absl::StatusOr<std::string> RequiredParam(const httplib::Request& request, const std::string& name) {
  if (!request.has_param(name) || request.get_param_value(name).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the query has no ", name, "; add ?", name, "=..."));
  }
  return request.get_param_value(name);
}

absl::StatusOr<uint64_t> UnsignedHeader(const httplib::Request& request, const std::string& name) {
  uint64_t value = 0;
  if (!request.has_header(name)) {
    return absl::InvalidArgumentError(absl::StrCat("the request has no ", name, " header"));
  }
  if (!absl::SimpleAtoi(request.get_header_value(name), &value)) {
    return absl::InvalidArgumentError(absl::StrCat("the ", name, " header '", request.get_header_value(name),
                                                   "' is not a non-negative decimal integer"));
  }
  return value;
}

// An httplib pattern (a regular expression) matching exactly `path`.
std::string ExactPattern(std::string_view path) {
  return absl::StrReplaceAll(std::string(path), {{".", "\\."}});
}

}  // namespace

HttpApi::HttpApi(ServiceContext& service, UploadStore::Options uploads)
    : service_(service), uploads_(service, uploads) {}

absl::StatusOr<std::string> HttpApi::Admit(const httplib::Request& request) const {
  if (!request.has_header("Authorization")) return service_.authenticator.IdentifyHttp(std::nullopt, request.remote_addr);
  const std::string authorization = request.get_header_value("Authorization");  // a copy: the view below reads it
  return service_.authenticator.IdentifyHttp(authorization, request.remote_addr);
}

absl::StatusOr<UploadStore::Lease> HttpApi::FindUpload(const httplib::Request& request) {
  if (absl::StatusOr<std::string> identity = Admit(request); !identity.ok()) return identity.status();
  absl::StatusOr<std::string> aggregation_id = RequiredParam(request, "aggregation_id");
  if (!aggregation_id.ok()) return aggregation_id.status();
  absl::StatusOr<std::string> client_id = RequiredParam(request, "client_id");
  if (!client_id.ok()) return client_id.status();
  return uploads_.Find(*aggregation_id, *client_id);
}

void HttpApi::Register(httplib::Server& routes) {
  // Each route's answers are counted by route and HTTP status.
  auto counted = [this](std::string route, auto handler) {
    return [this, route = std::move(route), handler](const httplib::Request& request, httplib::Response& response) {
      (this->*handler)(request, response);
      service_.metrics.http_requests.WithLabels({route, absl::StrCat(response.status)}).Increment();
    };
  };
  routes.Get("/v1/tasks", counted("tasks", &HttpApi::GetTasks));
  routes.Post("/v1/uploads", counted("uploads.start", &HttpApi::StartUpload));
  routes.Get("/v1/uploads", counted("uploads.get", &HttpApi::GetUpload));
  routes.Patch("/v1/uploads",
               [this](const httplib::Request& request, httplib::Response& response, const httplib::ContentReader& body) {
                 WriteUpload(request, response, body);
                 service_.metrics.http_requests.WithLabels({"uploads.write", absl::StrCat(response.status)}).Increment();
               });
  routes.Post("/v1/uploads:submit", counted("uploads.submit", &HttpApi::SubmitUpload));
  routes.Delete("/v1/uploads", counted("uploads.abort", &HttpApi::AbortUpload));
  routes.Get("/v1/aggregations", counted("aggregations", &HttpApi::GetAggregation));
  routes.Get("/v1/results", counted("results", &HttpApi::GetResult));
  for (const WebAsset& asset : WebAssets()) {
    routes.Get(ExactPattern(asset.path), [&asset](const httplib::Request&, httplib::Response& response) {
      response.set_content(asset.content.data(), asset.content.size(), std::string(asset.content_type));
    });
  }
  routes.Get("/examples/logistic-regression", [](const httplib::Request&, httplib::Response& response) {
    response.set_redirect("/examples/logistic-regression/", 301);
  });
  // Known paths asked with another method: 405, saying which are allowed.
  std::vector<std::pair<std::string, std::string>> allowed_methods = {
      {"/v1/tasks", "GET"}, {"/v1/uploads", "GET, POST, PATCH, DELETE"}, {"/v1/uploads:submit", "POST"},
      {"/v1/aggregations", "GET"}, {"/v1/results", "GET"}};
  for (const WebAsset& asset : WebAssets()) allowed_methods.emplace_back(std::string(asset.path), "GET");
  for (const auto& [path, allowed] : allowed_methods) {
    auto refuse = [path = std::string(path), allowed = std::string(allowed)](const httplib::Request& request,
                                                                             httplib::Response& response) {
      response.set_header("Allow", allowed);
      AnswerError(response,
                  absl::UnimplementedError(absl::StrCat(request.method, " is not a method of ", path, "; use ", allowed)),
                  std::nullopt, 405);
    };
    const std::string pattern = ExactPattern(path);
    const std::string methods = allowed;
    if (methods.find("GET") == std::string::npos) routes.Get(pattern, refuse);
    if (methods.find("POST") == std::string::npos) routes.Post(pattern, refuse);
    if (methods.find("PATCH") == std::string::npos) routes.Patch(pattern, refuse);
    if (methods.find("DELETE") == std::string::npos) routes.Delete(pattern, refuse);
    routes.Put(pattern, refuse);
  }
  routes.set_payload_max_length(HttpUpload::kMaxChunkBytes);
  // What the library answers by itself (no route, a body over the limit) as an HttpError.
  routes.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& request,
                                                                  httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (response.status == 404) {
      AnswerError(response, absl::NotFoundError(absl::StrCat("no such path: ", request.path,
                                                             " (docs/PROTOCOL.md 4a lists the HTTP path's)")));
    } else if (response.status == 413) {
      AnswerError(response,
                  absl::ResourceExhaustedError(absl::StrCat("the body is larger than the ", HttpUpload::kMaxChunkBytes,
                                                            "-byte limit of one request; write it in smaller chunks")),
                  std::nullopt, 413);
    } else {
      AnswerError(response, absl::InvalidArgumentError(absl::StrCat("HTTP ", response.status)), std::nullopt,
                  response.status);
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
}

absl::StatusOr<std::shared_ptr<Aggregation>> HttpApi::FindAggregation(const httplib::Request& request) const {
  if (absl::StatusOr<std::string> identity = Admit(request); !identity.ok()) return identity.status();
  absl::StatusOr<std::string> id = RequiredParam(request, "aggregation_id");
  if (!id.ok()) return id.status();
  return service_.registry.Find(*id);
}

void HttpApi::GetTasks(const httplib::Request& request, httplib::Response& response) {
  if (absl::StatusOr<std::string> identity = Admit(request); !identity.ok()) {
    AnswerError(response, identity.status());
    return;
  }
  int wanted = 1;
  if (request.has_param("max_tasks") && !absl::SimpleAtoi(request.get_param_value("max_tasks"), &wanted)) {
    AnswerError(response, absl::InvalidArgumentError("max_tasks is not an integer"));
    return;
  }
  wanted = wanted <= 0 ? 1 : std::min(wanted, kMaxTasks);
  v1::GetTaskResponse tasks;
  tasks.set_protocol_version(kProtocolVersion);
  for (const auto& aggregation : service_.registry.OpenAggregations(wanted, request.get_param_value("client_id"))) {
    *tasks.add_tasks() = aggregation->config().proto;
  }
  AnswerJson(response, tasks);
}

void HttpApi::StartUpload(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<std::string> identity = Admit(request);
  if (!identity.ok()) {
    AnswerError(response, identity.status());
    return;
  }
  v1::UpdateHeader header;
  absl::Status status = ParseJson(request.body, "fedagg.v1.UpdateHeader", &header);
  for (const char* name : {"aggregation_id", "client_id"}) {
    if (!status.ok()) break;
    absl::StatusOr<std::string> id = RequiredParam(request, name);
    std::string* in_header =
        std::string_view(name) == "aggregation_id" ? header.mutable_aggregation_id() : header.mutable_client_id();
    if (!id.ok()) {
      status = id.status();
    } else if (!in_header->empty() && *in_header != *id) {
      status = absl::InvalidArgumentError(absl::StrCat("the header's ", name, " '", *in_header,
                                                       "' is not the query's '", *id, "'"));
    } else {
      *in_header = *id;
    }
  }
  if (!status.ok()) {
    AnswerError(response, status);
    return;
  }
  bool created = false;
  absl::StatusOr<UploadStore::Lease> upload = uploads_.FindOrStart(header, *identity, created);
  if (!upload.ok()) {
    // A conflict with the upload open for the pair: say how far that one got.
    std::optional<uint64_t> committed;
    if (upload.status().code() == absl::StatusCode::kAlreadyExists) {
      if (absl::StatusOr<UploadStore::Lease> open = uploads_.Find(header.aggregation_id(), header.client_id());
          open.ok()) {
        committed = (*open)->CommittedSize();
      }
    }
    AnswerError(response, upload.status(), committed);
    return;
  }
  absl::StatusOr<v1::UploadStatus> started = (*upload)->AwaitStarted(absl::Now() + kAnswerWait);
  if (!started.ok()) {
    AnswerError(response, started.status());
    return;
  }
  const v1::UploadStatus::State state = started->state();
  AnswerJson(response, *started,
             state == v1::UploadStatus::WAITING || state == v1::UploadStatus::COUNTING ? 202 : (created && state == v1::UploadStatus::OPEN ? 201 : 200));
}

void HttpApi::GetUpload(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<UploadStore::Lease> upload = FindUpload(request);
  if (!upload.ok()) {
    AnswerError(response, upload.status());
    return;
  }
  AnswerJson(response, (*upload)->Status());
}

void HttpApi::WriteUpload(const httplib::Request& request, httplib::Response& response,
                          const httplib::ContentReader& body) {
  // Refused before the body is read: the connection is closed rather than read through.
  auto refuse_unread = [&response](const absl::Status& status, std::optional<uint64_t> committed, int http_status) {
    response.set_header("Connection", "close");
    AnswerError(response, status, committed, http_status);
  };
  absl::StatusOr<UploadStore::Lease> upload = FindUpload(request);
  if (!upload.ok()) {
    refuse_unread(upload.status(), std::nullopt, 0);
    return;
  }
  absl::StatusOr<uint64_t> length = UnsignedHeader(request, "Content-Length");
  if (!length.ok()) {
    refuse_unread(absl::InvalidArgumentError("send the chunk with a Content-Length"), (*upload)->CommittedSize(), 0);
    return;
  }
  if (*length > HttpUpload::kMaxChunkBytes) {
    refuse_unread(absl::ResourceExhaustedError(absl::StrCat("a chunk of ", *length, " bytes is larger than the ",
                                                            HttpUpload::kMaxChunkBytes,
                                                            "-byte limit of one write; write it in smaller chunks")),
                  (*upload)->CommittedSize(), 413);
    return;
  }
  absl::StatusOr<uint64_t> offset = UnsignedHeader(request, "Upload-Offset");
  absl::StatusOr<uint64_t> crc = UnsignedHeader(request, "Upload-Crc32c");
  if (offset.ok() && crc.ok() && *crc > UINT32_MAX) {
    crc = absl::InvalidArgumentError("the Upload-Crc32c header is larger than a 32-bit checksum");
  }
  if (!offset.ok() || !crc.ok()) {
    refuse_unread(offset.ok() ? crc.status() : offset.status(), (*upload)->CommittedSize(), 0);
    return;
  }
  absl::StatusOr<v1::UploadStatus> written =
      (*upload)->Write(*offset, static_cast<uint32_t>(*crc), *length,
                       [&body](absl::FunctionRef<bool(const char*, size_t)> take) {
                         return body([&take](const char* data, size_t size) { return take(data, size); });
                       });
  if (!written.ok()) {
    // A refusal before reading (state, gap, range) leaves the body unread.
    if (written.status().code() != absl::StatusCode::kDataLoss &&
        written.status().code() != absl::StatusCode::kCancelled) {
      response.set_header("Connection", "close");
    }
    AnswerError(response, written.status(), (*upload)->CommittedSize());
    return;
  }
  AnswerJson(response, *written);
}

void HttpApi::SubmitUpload(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<UploadStore::Lease> upload = FindUpload(request);
  if (!upload.ok()) {
    AnswerError(response, upload.status());
    return;
  }
  v1::UpdateEnd end;
  if (absl::Status parsed = ParseJson(request.body, "fedagg.v1.UpdateEnd", &end); !parsed.ok()) {
    AnswerError(response, parsed, (*upload)->CommittedSize());
    return;
  }
  absl::StatusOr<v1::UploadStatus> submitted = (*upload)->Submit(end, absl::Now() + kAnswerWait);
  if (!submitted.ok()) {
    AnswerError(response, submitted.status(), (*upload)->CommittedSize());
    return;
  }
  AnswerJson(response, *submitted, submitted->state() == v1::UploadStatus::COUNTING ? 202 : 200);
}

void HttpApi::AbortUpload(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<UploadStore::Lease> upload = FindUpload(request);
  if (!upload.ok()) {
    AnswerError(response, upload.status());
    return;
  }
  absl::StatusOr<v1::UploadStatus> aborted = (*upload)->Abort();
  if (!aborted.ok()) {
    AnswerError(response, aborted.status());
    return;
  }
  AnswerJson(response, *aborted);
}

void HttpApi::GetAggregation(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<std::shared_ptr<Aggregation>> found = FindAggregation(request);
  if (!found.ok()) {
    AnswerError(response, found.status());
    return;
  }
  AnswerJson(response, (*found)->Status());
}

void HttpApi::GetResult(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<std::shared_ptr<Aggregation>> found = FindAggregation(request);
  absl::StatusOr<std::shared_ptr<const AggregateResult>> result =
      found.ok() ? (*found)->Result() : absl::StatusOr<std::shared_ptr<const AggregateResult>>(found.status());
  if (!result.ok()) {
    AnswerError(response, result.status());
    return;
  }
  if (!request.has_param("field")) {
    AnswerJson(response, *ResultStream(*result, (*found)->Status()).Next());
    return;
  }
  size_t field = 0;
  v1::ResultChunk::Part part = v1::ResultChunk::VALUES;
  if (!absl::SimpleAtoi(request.get_param_value("field"), &field) || field >= (*result)->fields.size()) {
    AnswerError(response, absl::InvalidArgumentError(absl::StrCat("field '", request.get_param_value("field"),
                                                                  "' is not a field number below ",
                                                                  (*result)->fields.size())));
    return;
  }
  if (request.has_param("part") &&
      (!v1::ResultChunk::Part_Parse(request.get_param_value("part"), &part) || part == v1::ResultChunk::PART_UNSPECIFIED)) {
    AnswerError(response, absl::InvalidArgumentError(absl::StrCat("part '", request.get_param_value("part"),
                                                                  "' is not VALUES, INDICES or COUNTS")));
    return;
  }
  absl::Span<const std::byte> bytes = ResultStream::PartBytes(**result, field, part);
  response.set_content(reinterpret_cast<const char*>(bytes.data()), bytes.size(), "application/octet-stream");
}

}  // namespace fedagg
