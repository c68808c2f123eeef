// The fedagg.v1.Tier service, on the parent side of a tier link: child aggregators Join
// an aggregation (and hear SEAL / FLUSH on that stream), ClaimClients before they count a
// client's update (so each client is counted once in the whole tree), and PushPartial
// their partial aggregates, which are merged exactly once per (child, sequence). Each call
// names the incarnation of the aggregation it means; another incarnation is NOT_FOUND.
#ifndef FEDAGG_SERVICE_RPC_TIER_SERVICE_H_
#define FEDAGG_SERVICE_RPC_TIER_SERVICE_H_

#include <string>

#include "fedagg/v1/tier.grpc.pb.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class TierService final : public v1::Tier::CallbackService {
 public:
  explicit TierService(ServiceContext& context);

  grpc::ServerWriteReactor<v1::TierCommand>* Join(grpc::CallbackServerContext* context,
                                                  const v1::JoinRequest* request) override;
  grpc::ServerReadReactor<v1::PartialChunk>* PushPartial(
      grpc::CallbackServerContext* context, v1::PushPartialResponse* response) override;
  grpc::ServerUnaryReactor* ClaimClients(grpc::CallbackServerContext* context,
                                         const v1::ClaimClientsRequest* request,
                                         v1::ClaimClientsResponse* response) override;

 private:
  ServiceContext& context_;
  const std::string instance_;  // TierCommand.parent_instance: this process
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_TIER_SERVICE_H_
