// Turns off Abseil's lock-order graph (see the header for why fedagg's programs do).
#include "service/core/abseil_deadlock_detection.h"

#include "absl/synchronization/mutex.h"

namespace fedagg {

void TurnOffAbseilDeadlockDetection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace fedagg
