// MalformedRequestInterceptor: INVALID_ARGUMENT for requests that are not valid protobuf.
#include "service/rpc/malformed_request_interceptor.h"

#include <google/protobuf/descriptor.h>

#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "fedagg/v1/aggregation.pb.h"
#include "fedagg/v1/control.pb.h"
#include "fedagg/v1/tier.pb.h"

namespace fedagg {
namespace {

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(std::string message) : message_(std::move(message)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      // What gRPC sends when it could not parse the request of an existing method.
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message_));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string message_;
};

}  // namespace

MalformedRequestInterceptorFactory::MalformedRequestInterceptorFactory(
    absl::Span<const absl::string_view> raw_methods) {
  // Every service of fedagg.v1's files (one message of each names its file).
  for (const google::protobuf::FileDescriptor* file :
       {v1::Hello::descriptor()->file(), v1::GetAggregationRequest::descriptor()->file(),
        v1::JoinRequest::descriptor()->file()}) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const google::protobuf::MethodDescriptor* method = service->method(m);
        std::string path = absl::StrCat("/", service->full_name(), "/", method->name());
        if (absl::c_linear_search(raw_methods, path)) continue;
        messages_[path] = absl::StrCat("malformed protobuf: the request to ", path, " is not a valid ",
                                       method->input_type()->full_name(),
                                       "; check that the client encodes its requests with fedagg's "
                                       "proto/fedagg/v1 definitions");
      }
    }
  }
}

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const auto it = messages_.find(absl::string_view(info->method()));
  if (it == messages_.end()) return nullptr;  // parsed by its handler, or not fedagg's: nothing to do
  return new MalformedRequestInterceptor(it->second);
}

}  // namespace fedagg
