// The ingest window's size when --ingest_window_mib=auto (the default): 16 MiB per core,
// at least 64 MiB, so that updates from many streams are received at once: a window that
// admits few updates holds ingest below the socket's speed (on 2 cores, 16 MiB admitted
// eight 2 MB sparse updates and held them at 50% of the bare gRPC sink, 64 MiB at 65%;
// dense 1 MiB updates went from 76% to 97%: docs/BENCHMARKS.md, item 43), and on 16 cores
// 256 MiB is where dense 16 MiB updates reached 95% of the sink. Capped so that it never
// takes more than a quarter of the memory budget (--memory_budget_bytes, when set) or a
// sixteenth of the machine's memory, and never more than 1 GiB. docs/OPERATIONS.md says
// when to set it by hand.
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
