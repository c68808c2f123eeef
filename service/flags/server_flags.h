// fedagg-server's flags, one file per concern, which is how --help groups them:
// network_flags.cc (listening, TLS, callers, streams), ingest_flags.cc (batching and
// memory), tree_flags.cc (the parent, checkpoints) and backend_flags.cc (the reduction
// backend). Each Apply function copies its flags into the server's configuration; a value
// out of range is INVALID_ARGUMENT naming the flag.
#ifndef FEDAGG_SERVICE_FLAGS_SERVER_FLAGS_H_
#define FEDAGG_SERVICE_FLAGS_SERVER_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/backend/backend_choice.h"
#include "service/server.h"

namespace fedagg {

absl::Status ApplyNetworkFlags(ServerConfig& config);
// `ingest_window_reason`: how the ingest window's size was chosen, for the log.
absl::Status ApplyIngestFlags(ServerConfig& config, std::string* ingest_window_reason);
absl::Status ApplyTreeFlags(ServerConfig& config);

// --heap_arenas (0: glibc's default), for main to apply before any thread starts.
absl::StatusOr<int> HeapArenasFlag();

// The backend that --backend, --devices, --cuda_plugin and the staging flags choose.
absl::StatusOr<BackendChoice> ChooseBackendFromFlags();

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_FLAGS_SERVER_FLAGS_H_
