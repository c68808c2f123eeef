// What the load generator sends: a pool of a few distinct generated updates for an
// aggregation's spec (client i sends update i % pool size), and which clients suffer which
// deliberate fault. Values are chosen so the expected result can be checked: floating
// fields hold values in [0.5, 1.5) (no cancellation, so float32 rounding stays bounded),
// integer fields hold 0..15 (sums are exact), sparse fields hold distinct sorted indices.
// An encoded field's values are generated the same way and sent encoded (each pool
// update rounded with a stream of its own); the expected result is the reference
// reduction of what was sent, decoded, so the check holds the node's decoding exactly.
#ifndef FEDAGG_CLIENT_STUB_LOADGEN_WORKLOAD_H_
#define FEDAGG_CLIENT_STUB_LOADGEN_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client_stub/secure_contribution.h"
#include "absl/types/span.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"

namespace fedagg::loadgen {

// One generated update, owning the memory its view points into.
class GeneratedUpdate {
 public:
  const UpdateView& view() const { return view_; }
  // Bytes of values and indices: what the update carries on the wire, headers aside.
  int64_t payload_bytes() const { return payload_bytes_; }
  // The same in the declared dtypes, before any value encoding: the model bytes it
  // carries (equal to payload_bytes() when no field is encoded).
  int64_t model_bytes() const { return model_bytes_; }

 private:
  friend absl::StatusOr<std::vector<GeneratedUpdate>> GenerateUpdates(const ReductionSpec&, absl::Span<const double>,
                                                                      int, uint64_t);
  friend void ClipAsAClientWould(const ReductionSpec& spec, GeneratedUpdate& update);
  std::vector<std::vector<std::byte>> values_;
  std::vector<std::vector<int64_t>> indices_;
  UpdateView view_;
  int64_t payload_bytes_ = 0;
  int64_t model_bytes_ = 0;
};

// A generated update of a spec with differential privacy, its plain values (before any
// encoding) scaled to the spec's clip norm, as a client clips before it discretizes.
void ClipAsAClientWould(const ReductionSpec& spec, GeneratedUpdate& update);

// `count` distinct updates for `spec`. `densities` holds one entry per leaf field (or one
// for all): the fraction of coordinates (sparse) or rows (row-sparse) an update touches,
// at least one; dense fields ignore it. Updates carry a weight in [1, 10) iff the spec has
// a weighted field.
absl::StatusOr<std::vector<GeneratedUpdate>> GenerateUpdates(const ReductionSpec& spec,
                                                             absl::Span<const double> densities, int count,
                                                             uint64_t seed);

// The deliberate faults. Each fraction picks exactly floor(N * fraction) of N clients,
// spread evenly (client i is picked when floor((i + 1) f) > floor(i f)); a client can be
// picked for several faults, which then happen in turn.
struct FaultPlan {
  double disconnect = 0;  // cut the stream halfway through the update, then send it whole again
  double lost_ack = 0;    // send the whole update, drop the stream before the answer, send it again
  double slow = 0;        // wait slow_delay before every message of the update
  absl::Duration slow_delay = absl::Milliseconds(20);
  // A secure aggregation's clients that leave before sharing their keys, before their
  // masked update, before their unmasking shares (a client picked twice leaves at the
  // earlier stage).
  double leave_before_sharing = 0, leave_before_input = 0, leave_before_unmasking = 0;

  struct ClientFaults {
    bool disconnect = false;
    bool lost_ack = false;
    bool slow = false;
    SecureDropout leave = SecureDropout::kNone;
  };
  ClientFaults For(int64_t client) const;
  // How many of the first `clients` clients are picked for a fraction.
  static int64_t Picked(double fraction, int64_t clients);
};

}  // namespace fedagg::loadgen

#endif  // FEDAGG_CLIENT_STUB_LOADGEN_WORKLOAD_H_
