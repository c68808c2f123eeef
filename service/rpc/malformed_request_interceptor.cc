// MalformedRequestInterceptor: INVALID_ARGUMENT for requests that are not valid protobuf.
#include "service/rpc/malformed_request_interceptor.h"

#include <google/protobuf/descriptor.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
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

// The INVALID_ARGUMENT message for a malformed request to `method` ("/fedagg.v1.Control/
// GetAggregation"); empty when `method` is not one of fedagg.v1's.
std::string MalformedRequestMessage(const std::string& method) {
  // "/fedagg.v1.Control/GetAggregation" -> "fedagg.v1.Control.GetAggregation"
  if (method.size() < 2 || method[0] != '/') return "";
  // Touching one message of each file makes sure they registered in the generated pool.
  (void)v1::Hello::descriptor();
  (void)v1::GetAggregationRequest::descriptor();
  (void)v1::JoinRequest::descriptor();
  const google::protobuf::MethodDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          absl::StrReplaceAll(method.substr(1), {{"/", "."}}));
  if (descriptor == nullptr || descriptor->service()->file()->package() != "fedagg.v1") return "";
  return absl::StrCat("malformed protobuf: the request to ", method, " is not a valid ",
                      descriptor->input_type()->full_name(),
                      "; check that the client encodes its requests with fedagg's proto/fedagg/v1 definitions");
}

}  // namespace

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  std::string message = MalformedRequestMessage(info->method());
  if (message.empty()) return nullptr;  // not one of fedagg's methods: nothing to do
  return new MalformedRequestInterceptor(std::move(message));
}

}  // namespace fedagg
