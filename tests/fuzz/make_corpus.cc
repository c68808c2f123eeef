// Writes the seed corpora of the fuzz targets into <dir>/<target>/: valid encodings of
// the inputs each target decodes (Contribute requests, serialized partial aggregates of
// the fuzz spec, checkpoint bodies) and, for the targets that read their input through
// FuzzedDataProvider, a few plain byte patterns. Usage: fedagg_fuzz_corpus tests/fuzz/corpus
// (scripts/fuzz.sh --seeds runs it).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fedagg/v1/aggregation.pb.h"
#include "service/core/partial_aggregate.h"
#include "service/rounds/checkpoint_file.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void Write(const std::filesystem::path& dir, const std::string& target, const std::string& name,
           const std::string& bytes) {
  std::filesystem::create_directories(dir / target);
  std::ofstream(dir / target / name, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fedagg;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::shared_ptr<const ReductionSpec> spec = fuzz::FuzzSpec();

  v1::ContributeRequest hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id("seed");
  Write(dir, "contribute_request", "hello", hello.SerializeAsString());
  v1::ContributeRequest header;
  header.mutable_header()->set_aggregation_id("fuzz");
  header.mutable_header()->set_weight(1.5);
  for (int64_t nnz : {0, 2, 1, 3}) header.mutable_header()->add_fields()->set_nnz(nnz);
  Write(dir, "contribute_request", "header", header.SerializeAsString());
  header.mutable_header()->mutable_fields(1)->set_nnz(int64_t{1} << 40);
  Write(dir, "contribute_request", "header-oversize", header.SerializeAsString());
  v1::ContributeRequest chunk;
  chunk.mutable_chunk()->set_field(1);
  chunk.mutable_chunk()->set_section(v1::INDICES);
  chunk.mutable_chunk()->set_offset(8);
  chunk.mutable_chunk()->set_data(std::string(16, '\1'));
  Write(dir, "contribute_request", "chunk", chunk.SerializeAsString());
  v1::ContributeRequest end;
  end.mutable_end()->set_crc32c(0x12345678);
  Write(dir, "contribute_request", "end", end.SerializeAsString());

  PartialAggregate partial(spec);
  Write(dir, "partial_aggregate", "empty", partial.Serialize().value());
  const std::vector<float> dense(8, 1.0f), sparse = {2.0f, 3.0f}, rows = {1.0f, 2.0f};
  const std::vector<int32_t> ints = {7, 9};
  const std::vector<int64_t> indices = {3, 15}, row = {2};
  const UpdateView update{{FieldValue::Dense<float>(dense), FieldValue::Sparse<float>(indices, sparse),
                           FieldValue::RowSparse<float>(row, rows), FieldValue::Sparse<int32_t>(indices, ints)},
                          2.0};
  if (!partial.Accumulate(update).ok()) return 1;
  Write(dir, "partial_aggregate", "one-update", partial.Serialize().value());
  if (!partial.Accumulate(update).ok()) return 1;
  Write(dir, "partial_aggregate", "two-updates", partial.Serialize().value());

  PartialAggregate exact(fuzz::DeterministicFuzzSpec());
  Write(dir, "deterministic_partial_aggregate", "empty", exact.Serialize().value());
  const std::vector<double> rows64 = {1.5, -2.25};
  const std::vector<int64_t> union_indices = {3, 31};
  const UpdateView exact_update{{FieldValue::Dense<float>(dense), FieldValue::Sparse<float>(indices, sparse),
                                 FieldValue::RowSparse<double>(row, rows64), FieldValue::Sparse<float>(union_indices, sparse)},
                                0.1};
  if (!exact.Accumulate(exact_update).ok()) return 1;
  Write(dir, "deterministic_partial_aggregate", "one-update", exact.Serialize().value());
  if (!exact.Accumulate(exact_update).ok()) return 1;
  Write(dir, "deterministic_partial_aggregate", "two-updates", exact.Serialize().value());

  std::string ascending;
  for (int i = 0; i < 256; ++i) ascending.push_back(static_cast<char>(i));
  // chunk_reassembly reads its choices front to back (fuzz::FuzzInput): a complete update
  // of the fuzz spec — header (4 fields, nnz 0, weight 1), field 0's 32 value bytes as
  // eight 1.0f, end with the right checksum — then the same with a wrong checksum.
  std::string update_ops = {0, 1, 1};                          // header, "fuzz", 4 fields
  for (int f = 0; f < 4; ++f) update_ops += {1, 1};            // nnz 0, declared dtype
  update_ops += {1, 1};                                        // weight 1.0
  update_ops += {3, 0};                                        // next piece of (field 0, VALUES)
  for (int i = 0; i < 8; ++i) update_ops += {1, 101};          // 1.0f
  Write(dir, "chunk_reassembly", "complete-update", update_ops + std::string{2, 1});
  Write(dir, "chunk_reassembly", "wrong-checksum", update_ops + std::string{2, 0, 7, 0, 0, 0});
  // checkpoint_file: a version byte (0: version 2), then a checkpoint's body: counted ids
  // (some erased, one counted again), children with and without leases, a partial.
  AggregationCheckpoint checkpoint;
  checkpoint.spec.set_aggregation_id("fuzz");
  checkpoint.state = v1::SEALED;
  checkpoint.detail = "sealed";
  checkpoint.contributions = 3;
  checkpoint.weight_sum = 3;
  ClientIdSet counted;
  for (const char* id : {"alice", "bob", "", "carol"}) counted.insert(id);
  counted.erase("bob");
  counted.insert("bob");
  checkpoint.counted = counted.Snapshot();
  checkpoint.children = {{"edge-1@1", 2, false, false, {"carol"}}, {"edge-2@1", 5, true, true, {}}};
  checkpoint.partial = partial.Serialize().value();
  const auto body = [](const AggregationCheckpoint& of) {
    return std::string(1, '\0') + EncodeCheckpoint(of).substr(kCheckpointHeaderBytes);
  };
  Write(dir, "checkpoint_file", "sealed", body(checkpoint));
  Write(dir, "checkpoint_file", "empty", body(AggregationCheckpoint{}));
  for (const char* target : {"update_validation", "encoded_update_validation", "chunk_reassembly"}) {
    Write(dir, target, "zeros", std::string(64, '\0'));
    Write(dir, target, "ones", std::string(128, '\1'));
    Write(dir, target, "ascending", ascending);
  }
  return 0;
}
