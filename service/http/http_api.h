// HttpApi: the HTTP path of clients without gRPC streams (docs/PROTOCOL.md 4a), as routes
// on an HttpServer: GET /v1/tasks, the resumable uploads under /v1/uploads (an
// UploadStore), GET /v1/aggregations and /v1/results, and the JavaScript client and the
// example page (web_assets.h). Every /v1/ request carries the node's bearer token when it
// has tokens; every refusal is an HttpError (http_json.h).
#ifndef FEDAGG_SERVICE_HTTP_HTTP_API_H_
#define FEDAGG_SERVICE_HTTP_HTTP_API_H_

#include <httplib.h>

#include <string>

#include "absl/status/statusor.h"
#include "service/http/upload_store.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class HttpApi {
 public:
  HttpApi(ServiceContext& service, UploadStore::Options uploads);

  // Adds the routes; `routes` must not outlive this HttpApi.
  void Register(httplib::Server& routes);
  const UploadStore& uploads() const { return uploads_; }

 private:
  // The caller's identity once its bearer token is checked (UNAUTHENTICATED otherwise).
  absl::StatusOr<std::string> Admit(const httplib::Request& request) const;
  // The upload a request names in its query (aggregation_id, client_id).
  absl::StatusOr<UploadStore::Lease> FindUpload(const httplib::Request& request);
  // The aggregation a request names in its query (aggregation_id), held here.
  absl::StatusOr<std::shared_ptr<Aggregation>> FindAggregation(const httplib::Request& request) const;

  void GetTasks(const httplib::Request& request, httplib::Response& response);
  void StartUpload(const httplib::Request& request, httplib::Response& response);
  void GetUpload(const httplib::Request& request, httplib::Response& response);
  void WriteUpload(const httplib::Request& request, httplib::Response& response, const httplib::ContentReader& body);
  void SubmitUpload(const httplib::Request& request, httplib::Response& response);
  void AbortUpload(const httplib::Request& request, httplib::Response& response);
  void GetAggregation(const httplib::Request& request, httplib::Response& response);
  void GetResult(const httplib::Request& request, httplib::Response& response);

  ServiceContext& service_;
  UploadStore uploads_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_HTTP_API_H_
