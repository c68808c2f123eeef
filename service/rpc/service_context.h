// ServiceContext: what every RPC handler of a fedagg server shares — the aggregation
// registry, the authenticator and the limits an operator set.
#ifndef FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_
#define FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_

#include <cstdint>

#include "monitoring/service_metrics.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rpc/authenticator.h"

namespace fedagg {

inline constexpr uint32_t kProtocolVersion = 1;

struct ServiceContext {
  AggregationRegistry& registry;
  const Authenticator& authenticator;
  ServiceMetrics& metrics;
  uint64_t max_update_bytes = uint64_t{1} << 30;
  // Open aggregations listed in a Welcome.
  int welcome_aggregations = 16;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_
