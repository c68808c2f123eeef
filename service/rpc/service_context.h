// ServiceContext: what every RPC handler of a fedagg server shares — the aggregation
// registry, the authenticator and the limits an operator set (update size, memory budget,
// ingest window, streams per caller identity, stall timeout).
#ifndef FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_
#define FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_

#include <cstdint>

#include "monitoring/service_metrics.h"
#include "absl/time/time.h"
#include "service/core/ingest_window.h"
#include "service/core/memory_budget.h"
#include "service/core/narrowed_partial.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rpc/authenticator.h"
#include "service/rpc/stall_sweeper.h"
#include "service/rpc/stream_limiter.h"

namespace fedagg {

inline constexpr uint32_t kProtocolVersion = 1;
// The largest gRPC message a fedagg server receives: a chunk of at most 4 MiB (of an
// update or of a child's partial) and the message around it.
inline constexpr uint64_t kMaxReceivedMessageBytes = (uint64_t{4} << 20) + (64 << 10);

struct ServiceContext {
  AggregationRegistry& registry;
  const Authenticator& authenticator;
  ServiceMetrics& metrics;
  uint64_t max_update_bytes = uint64_t{1} << 30;
  // Open aggregations listed in a Welcome.
  int welcome_aggregations = 16;
  // Accounts (and bounds) the bytes held for client data; null: no accounting.
  MemoryBudget* memory_budget = nullptr;
  // Bounds the update bytes held at once by making new updates wait; null: no bound.
  IngestWindow* ingest_window = nullptr;
  // Open Contribute and Submit streams per caller identity; null: no limit.
  StreamLimiter* stream_limiter = nullptr;
  // Checks the streams' watches: an update that receives no message for its timeout
  // (--stall_timeout) is discarded and its stream ended with DEADLINE_EXCEEDED; null, or a
  // sweeper without a timeout: never.
  StallSweeper* stall_sweeper = nullptr;
  // What this node asks its children's partials in (--child_partial_dtype).
  PartialPrecision child_partial_precision = PartialPrecision::kFull;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_SERVICE_CONTEXT_H_
