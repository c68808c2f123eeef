// The ingest window's size when --ingest_window_mib=auto (the default): enough for about
// one large update (16 MiB) in flight per two cores — each stream being received keeps
// roughly one core of gRPC's busy — so a node with many cores takes large updates from
// many streams at once, and a 2-core node keeps the 16 MiB it always had (memory near the
// accumulators plus one update). Capped so that it never takes more than a quarter of the
// memory budget (--memory_budget_bytes, when set) or a sixteenth of the machine's memory,
// and never more than 1 GiB. docs/OPERATIONS.md says when to set it by hand.
#ifndef FEDAGG_SERVICE_CORE_INGEST_WINDOW_SIZE_H_
#define FEDAGG_SERVICE_CORE_INGEST_WINDOW_SIZE_H_

#include <cstdint>
#include <string>

#include "service/core/machine_resources.h"

namespace fedagg {

struct IngestWindowSize {
  uint64_t bytes = 0;
  std::string reason;  // how it was derived, for the log
};

// `memory_budget_bytes` 0: no budget.
IngestWindowSize AutoIngestWindow(const MachineResources& machine, uint64_t memory_budget_bytes);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_INGEST_WINDOW_SIZE_H_
