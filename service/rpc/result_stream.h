// ResultStream: cuts an AggregateResult into the ResultChunk messages of
// Control.GetResult — a first chunk with the status and every field's header, then the
// bytes of each field's values, indices and counts in slices of at most 1 MiB.
#ifndef FEDAGG_SERVICE_RPC_RESULT_STREAM_H_
#define FEDAGG_SERVICE_RPC_RESULT_STREAM_H_

#include <memory>
#include <optional>

#include "fedagg/v1/control.pb.h"
#include "service/core/aggregate_result.h"

namespace fedagg {

class ResultStream {
 public:
  // 1 MiB of data per message: well under gRPC's default 4 MiB receive limit.
  static constexpr size_t kChunkBytes = 1 << 20;

  ResultStream(std::shared_ptr<const AggregateResult> result, v1::AggregationStatus status);
  // The next chunk, or nullopt after the last one.
  std::optional<v1::ResultChunk> Next();

  // The bytes of one part (VALUES, INDICES, COUNTS) of one field of `result`.
  static absl::Span<const std::byte> PartBytes(const AggregateResult& result, size_t field, int part);

 private:

  std::shared_ptr<const AggregateResult> result_;
  v1::AggregationStatus status_;
  bool header_sent_ = false;
  size_t field_ = 0;
  int part_ = v1::ResultChunk::VALUES;
  size_t offset_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_RESULT_STREAM_H_
