// The checkpoint file of one aggregation: what a root aggregator writes to
// --checkpoint_dir so that an aggregation survives a crash (docs/RELIABILITY.md,
// "Durability"). Defines the record (spec, lifecycle state, counted client ids, the
// progress of each child aggregator, the serialized partial aggregate), its checksummed
// binary encoding, and the atomic write (temp file, fsync, rename, fsync of the directory)
// and read. A torn or corrupt file is refused with DATA_LOSS, never half-read.
#ifndef FEDAGG_SERVICE_ROUNDS_CHECKPOINT_FILE_H_
#define FEDAGG_SERVICE_ROUNDS_CHECKPOINT_FILE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fedagg/v1/types.pb.h"
#include "service/core/keyed_random.h"
#include "service/rounds/client_id_set.h"

namespace fedagg {

struct AggregationCheckpoint {
  // What a parent merged from one child aggregator: its pushes up to `last_sequence`;
  // the client ids it claimed whose updates none of them carried yet (its leases); and
  // whether the parent gave it up as lost, releasing those ids (it may push no more).
  struct ChildProgress {
    std::string child_id;
    uint64_t last_sequence = 0;
    bool final_received = false;
    bool released = false;
    std::vector<std::string> leased;
  };

  v1::AggregationSpec spec;
  v1::AggregationState state = v1::OPEN;
  std::string detail;
  int64_t contributions = 0;
  double weight_sum = 0;
  // Client ids counted: whose update is in `partial`, or claimed by a child (its leases).
  // Taken from the aggregation's set without copying an id; written in the order counted.
  ClientIdList counted;
  std::vector<ChildProgress> children;
  std::string partial;  // PartialAggregate::Serialize(), everything counted included
  // A differentially private aggregation's noise key, once FINALIZED: the result is the
  // partial's report noised with it (privacy_noise.h), so a restart publishes the very
  // result it had made, never a second draw. A secret like the un-noised partial itself.
  std::optional<NoiseKey> noise_key;
  // A secure aggregation's root private key, which its clients seal their unmasking
  // shares to (SecAggUnmasker): kept so that a restarted root can still unmask what its
  // children deliver. A secret like the noise key: the file is readable by its owner only.
  std::optional<std::array<uint8_t, 32>> secure_root_key;
  // Not in the file's body: when the file was last written (its modification time, set
  // by ReadCheckpointFile). A finished aggregation's last checkpoint is written within a
  // checkpoint interval of its finishing, and never again.
  absl::Time written = absl::InfinitePast();
};

// File layout (little-endian): magic "FEDAGGCK", u32 format version, u32 CRC-32C of the
// body, u64 body length, then the body (see checkpoint_file.cc). Versions 1 (before
// children's leases: its children hold none), 2 (before the noise key) and 3 (before the
// secure aggregation's root key) are still read.
inline constexpr uint32_t kCheckpointFormatVersion = 4;
inline constexpr size_t kCheckpointHeaderBytes = 8 + 4 + 4 + 8;  // before the body
inline constexpr absl::string_view kCheckpointSuffix = ".ckpt";

std::string EncodeCheckpoint(const AggregationCheckpoint& checkpoint);
// DATA_LOSS for a truncated, torn or corrupt file (bad magic, length or checksum);
// FAILED_PRECONDITION for a format version this build does not read.
absl::StatusOr<AggregationCheckpoint> DecodeCheckpoint(absl::string_view bytes);

// The file name of an aggregation's checkpoint inside the checkpoint directory.
std::string CheckpointFileName(const std::string& aggregation_id);

// Replaces dir/name with `bytes` atomically: writes dir/name.tmp, fsyncs it, renames it
// over dir/name and fsyncs the directory. A crash at any point leaves either the old file
// or the new one (a leftover .tmp is ignored by readers and overwritten next time).
absl::Status WriteFileAtomically(const std::string& dir, const std::string& name, absl::string_view bytes);

// Reads and decodes one checkpoint file; errors name the path.
absl::StatusOr<AggregationCheckpoint> ReadCheckpointFile(const std::string& path);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CHECKPOINT_FILE_H_
