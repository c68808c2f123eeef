// The fedagg.v1.Cohorts service: a secure aggregation's stages between a client and the
// node that counts its masked update (docs/PROTOCOL.md 4b). One JoinCohort stream per
// client; its messages go to the aggregation's SecureCohorts, whose answers come back on
// the stream, and a refusal ends it with its status.
#ifndef FEDAGG_SERVICE_RPC_COHORT_SERVICE_H_
#define FEDAGG_SERVICE_RPC_COHORT_SERVICE_H_

#include "fedagg/v1/secure_aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class CohortService final : public v1::Cohorts::CallbackService {
 public:
  explicit CohortService(ServiceContext& context) : context_(context) {}

  grpc::ServerBidiReactor<v1::CohortRequest, v1::CohortResponse>* JoinCohort(
      grpc::CallbackServerContext* context) override;

 private:
  ServiceContext& context_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_COHORT_SERVICE_H_
