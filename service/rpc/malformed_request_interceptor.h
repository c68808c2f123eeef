// MalformedRequestInterceptor: gives a request that is not valid protobuf the answer a
// person can act on on every fedagg method. gRPC answers such a request on a typed
// (unary or server-streaming) method with UNIMPLEMENTED and no message, as if the method
// did not exist; this server interceptor turns that status, on fedagg.v1's own methods
// (which always exist), into INVALID_ARGUMENT naming the method and the message type it
// expected. Contribute and Submit parse their raw bytes themselves (raw_message.h) and
// never produce that status. An unknown method keeps gRPC's UNIMPLEMENTED.
#ifndef FEDAGG_SERVICE_RPC_MALFORMED_REQUEST_INTERCEPTOR_H_
#define FEDAGG_SERVICE_RPC_MALFORMED_REQUEST_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fedagg {

class MalformedRequestInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `raw_methods` ("/fedagg.v1.Aggregation/Contribute"): methods whose handlers parse
  // their raw bytes themselves; their calls get no interceptor, and so none of gRPC's
  // interception work on each of their messages.
  explicit MalformedRequestInterceptorFactory(absl::Span<const absl::string_view> raw_methods);
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  // Per fedagg.v1 method whose requests gRPC parses, by path: the INVALID_ARGUMENT message
  // for a malformed request (built once, not per call).
  absl::flat_hash_map<std::string, std::string> messages_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_MALFORMED_REQUEST_INTERCEPTOR_H_
