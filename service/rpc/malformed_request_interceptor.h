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

namespace fedagg {

class MalformedRequestInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_MALFORMED_REQUEST_INTERCEPTOR_H_
