// Abseil's mutex deadlock detection, turned off in fedagg's programs. Debian's Abseil is
// built without NDEBUG, so by default every absl::Mutex acquisition (gRPC locks its own
// with them, several times per message) records its lock-order edges in one
// process-wide graph guarded by one global lock: every thread that takes any lock queues
// there, and a node with many cores serializes on it (the small-updates row of
// docs/BENCHMARKS.md section 2a shows it). fedagg's own locks are service/core/mutex.h's,
// which Abseil never checks; the tsan preset checks them. Tests keep the detection.
#ifndef FEDAGG_SERVICE_CORE_ABSEIL_DEADLOCK_DETECTION_H_
#define FEDAGG_SERVICE_CORE_ABSEIL_DEADLOCK_DETECTION_H_

namespace fedagg {

// Call first in main, before any thread starts.
void TurnOffAbseilDeadlockDetection();

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_ABSEIL_DEADLOCK_DETECTION_H_
