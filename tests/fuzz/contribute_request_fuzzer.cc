// Fuzz target: one Contribute request as the server receives it — raw bytes read as a
// chunk in place (ReadRawChunk) or parsed by ParseRawMessage, as the reactor does — and,
// when it is an update header, the sizing and limits UpdateBuffer::Create applies before
// anything is allocated. Invariants: a chunk read in place is exactly the chunk protobuf
// parses from the same bytes (whatever the split into slices); a buffer is either refused
// with nothing claimed from the memory budget, or exactly the declared size, within the
// update size limit, and claimed in full.
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "fedagg/v1/aggregation.pb.h"
#include "service/core/memory_budget.h"
#include "service/core/update_buffer.h"
#include "service/rpc/raw_chunk.h"
#include "service/rpc/raw_message.h"
#include "tests/fuzz/fuzz_support.h"

namespace {
constexpr uint64_t kMaxUpdateBytes = 1 << 20;
constexpr uint64_t kBudgetBytes = 1 << 19;
}  // namespace

// Protobuf logs every string field that is not UTF-8; the fuzzer produces many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static google::protobuf::LogSilencer silencer;  // lives for the whole run
  (void)silencer;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedagg;
  static const std::shared_ptr<const ReductionSpec> spec = fuzz::FuzzSpec();
  // Two slices, cut where the input's first byte says, as gRPC may hand a message over.
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  grpc::Slice slices[2] = {grpc::Slice(data, cut), grpc::Slice(data + cut, size - cut)};
  grpc::ByteBuffer buffer(slices, 2);
  std::optional<RawChunk> raw = ReadRawChunk(buffer, v1::ContributeRequest::kChunkFieldNumber);
  v1::ContributeRequest request;
  const bool parsed = ParseRawMessage(buffer, &request).ok();
  if (raw.has_value()) {
    FUZZ_CHECK(parsed && request.has_chunk());
    const v1::Chunk& chunk = request.chunk();
    FUZZ_CHECK(raw->field == chunk.field() && raw->section == static_cast<int32_t>(chunk.section()) &&
               raw->offset == chunk.offset() && raw->data_bytes == chunk.data().size());
    size_t at = 0;
    for (absl::Span<const std::byte> piece : raw->data) {
      FUZZ_CHECK(piece.size() <= chunk.data().size() - at &&
                 std::memcmp(piece.data(), chunk.data().data() + at, piece.size()) == 0);
      at += piece.size();
    }
    FUZZ_CHECK(at == chunk.data().size());
  }
  if (!parsed || !request.has_header()) return 0;

  const v1::UpdateHeader& header = request.header();
  std::vector<int64_t> nnz;
  for (const v1::FieldLayout& layout : header.fields()) nnz.push_back(layout.nnz());
  std::optional<double> weight;
  if (header.has_weight()) weight = header.weight();
  MemoryBudget budget(kBudgetBytes);
  absl::StatusOr<UpdateBuffer> update = UpdateBuffer::Create(*spec, nnz, weight, kMaxUpdateBytes, &budget);
  if (!update.ok()) {
    FUZZ_CHECK(budget.used() == 0);
    return 0;
  }
  FUZZ_CHECK(update->total_bytes() <= kMaxUpdateBytes && update->total_bytes() <= kBudgetBytes);
  FUZZ_CHECK(budget.used() == update->total_bytes());
  uint64_t total = 0;
  for (size_t f = 0; f < update->num_fields(); ++f) {
    const FieldSpec& field = spec->fields()[f];
    const size_t indices = update->section(f, UpdateBuffer::Section::kIndices).size();
    const size_t values = update->section(f, UpdateBuffer::Section::kValues).size();
    const uint64_t element = DTypeSize(field.type.dtype);
    if (field.encoding == Encoding::kDense) {
      FUZZ_CHECK(indices == 0 && values == field.type.num_bytes());
    } else {
      FUZZ_CHECK(indices == static_cast<size_t>(nnz[f]) * sizeof(int64_t));
      FUZZ_CHECK(values == static_cast<size_t>(nnz[f]) * static_cast<uint64_t>(field.row_width) * element);
    }
    total += indices + values;
  }
  FUZZ_CHECK(total == update->total_bytes());
  return 0;
}
