// Fuzz target: chunk reassembly — a sequence of update headers, chunks (field, section,
// offset, bytes; either arbitrary or the next well-formed piece of a section, so that
// complete updates are common) and ends, decoded from arbitrary bytes, through the UpdateAssembler the
// Contribute and Submit reactors use, against a live aggregation. A model keeps the bytes
// of every chunk the assembler accepted. Invariants: an update is counted only at its
// end, exactly once, and only when the end carries the CRC-32C of the accepted bytes;
// every refusal leaves the contribution count as it was; an end with the right checksum
// over complete sections is never refused as corrupt.
#include <optional>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>

#include "monitoring/metrics_registry.h"
#include "monitoring/service_metrics.h"
#include "service/core/crc32c.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rounds/spec_conversion.h"
#include "service/rpc/authenticator.h"
#include "service/rpc/update_assembler.h"
#include "tests/fuzz/fuzz_support.h"

namespace fedagg::fuzz {
namespace {

// One node with the fuzz spec's aggregation "fuzz", alive for the whole run.
struct Node {
  Node() : metrics(metrics_registry), registry(AggregationOptions{}), authenticator({}),
           context{registry, authenticator, metrics, 1 << 20} {
    v1::AggregationSpec spec;
    spec.set_aggregation_id("fuzz");
    const std::shared_ptr<const ReductionSpec> reduction = FuzzSpec();
    *spec.mutable_value_type() = ValueTypeToProto(reduction->value_type());
    for (const FieldSpec& field : reduction->fields()) {
      v1::FieldIntrinsic* intrinsic = spec.add_intrinsics();
      intrinsic->set_intrinsic(static_cast<v1::Intrinsic>(static_cast<int>(field.intrinsic)));
      intrinsic->set_report_counts(field.report_counts);
    }
    spec.set_require_finite(true);
    absl::StatusOr<std::shared_ptr<Aggregation>> created = registry.Create(spec);
    FUZZ_CHECK(created.ok());
    aggregation = *created;
  }
  int64_t contributions() const { return aggregation->Status().contributions(); }

  MetricsRegistry metrics_registry;
  ServiceMetrics metrics;
  AggregationRegistry registry;
  Authenticator authenticator;
  ServiceContext context;
  std::shared_ptr<Aggregation> aggregation;
  uint64_t next_client = 0;
};

}  // namespace
}  // namespace fedagg::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedagg;
  static fuzz::Node* node = new fuzz::Node();
  fuzz::FuzzInput input(data, size);
  UpdateAssembler assembler(node->context);
  std::map<std::pair<uint32_t, int>, std::string> accepted;  // (field, section) -> bytes
  std::map<std::pair<uint32_t, int>, size_t> declared;       // section sizes the header implies
  const std::vector<FieldSpec>& specs = node->aggregation->reduction().fields();
  int fields = 0;
  std::string client;

  while (!input.empty()) {
    const int64_t before = node->contributions();
    switch (input.Pick(4)) {
      case 0: {  // header
        v1::UpdateHeader header;
        header.set_aggregation_id(input.Pick(16) == 0 ? "unknown" : "fuzz");
        fields = input.Bool() ? static_cast<int>(specs.size()) : input.Pick(6);
        declared.clear();
        for (int f = 0; f < fields; ++f) {
          v1::FieldLayout* layout = header.add_fields();
          layout->set_nnz(input.Pick(8) - 1);
          if (input.Pick(8) == 0) {
            layout->set_dtype(static_cast<v1::DType>(input.Pick(7)));
          }
          if (f < static_cast<int>(specs.size()) && layout->nnz() >= 0) {
            const FieldSpec& field = specs[f];
            const bool dense = field.encoding == Encoding::kDense;
            const size_t nnz = static_cast<size_t>(layout->nnz());
            declared[{f, v1::INDICES}] = dense ? 0 : nnz * sizeof(int64_t);
            declared[{f, v1::VALUES}] = dense ? field.type.num_bytes()
                                              : nnz * static_cast<size_t>(field.row_width) * DTypeSize(field.type.dtype);
          }
        }
        if (input.Pick(8) != 0) {
          header.set_weight(input.Bool() ? 1.0 : input.Raw<double>());
        }
        client = "client-" + std::to_string(node->next_client++);
        accepted.clear();
        absl::Status begun = absl::UnknownError("Begin did not answer");
        assembler.Begin(header, client, [&begun](absl::Status status) { begun = status; });
        FUZZ_CHECK(begun.code() != absl::StatusCode::kUnknown);  // answered inline: aggregation is local
        FUZZ_CHECK(begun.ok() == assembler.active());
        break;
      }
      case 1: {  // chunk
        v1::Chunk chunk;
        chunk.set_field(static_cast<uint32_t>(input.Pick(6)));
        chunk.set_section(static_cast<v1::Section>(input.Pick(4)));
        const std::string& so_far = accepted[{chunk.field(), chunk.section()}];
        chunk.set_offset(input.Bool() ? so_far.size() : input.Raw<uint16_t>() % 300);
        chunk.set_data(input.Bytes(static_cast<size_t>(input.Pick(65))));
        const bool was_active = assembler.active();
        if (assembler.AddChunk(chunk).ok()) {
          FUZZ_CHECK(was_active && chunk.offset() == so_far.size());
          accepted[{chunk.field(), chunk.section()}] += chunk.data();
        } else {
          FUZZ_CHECK(!assembler.active());  // a refused chunk abandons the update
        }
        break;
      }
      case 3: {  // the next well-formed piece of a declared section
        if (declared.empty()) break;
        auto section = declared.begin();
        std::advance(section, input.Pick(static_cast<int>(declared.size())));
        const auto [field, kind] = section->first;
        std::string& so_far = accepted[section->first];
        const size_t left = section->second - so_far.size();
        v1::Chunk chunk;
        chunk.set_field(field);
        chunk.set_section(static_cast<v1::Section>(kind));
        chunk.set_offset(so_far.size());
        std::string bytes;
        if (kind == v1::INDICES) {  // mostly in range: [-1, rows]
          while (bytes.size() + sizeof(int64_t) <= left && bytes.size() < 64) {
            const int64_t index = input.Pick(static_cast<int>(specs[field].rows) + 2) - 1;
            bytes.append(reinterpret_cast<const char*>(&index), sizeof(index));
          }
        } else {  // mostly small finite numbers of the field's dtype
          while (bytes.size() + 4 <= left && bytes.size() < 64) {
            if (specs[field].type.dtype == DType::kInt32) {
              const int32_t value = input.Pick(201) - 100;
              bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
            } else {
              const float value = input.Bool() ? static_cast<float>(input.Pick(201) - 100) : input.Raw<float>();
              bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
            }
          }
        }
        chunk.set_data(bytes);
        const bool was_active = assembler.active();
        if (assembler.AddChunk(chunk).ok()) {
          FUZZ_CHECK(was_active);
          so_far += bytes;
        } else {
          FUZZ_CHECK(!assembler.active());
        }
        break;
      }
      case 2: {  // end, with the checksum of the accepted bytes or another one
        uint32_t crc = 0;
        for (int f = 0; f < fields; ++f) {
          for (int section : {static_cast<int>(v1::INDICES), static_cast<int>(v1::VALUES)}) {
            const std::string& bytes = accepted[{static_cast<uint32_t>(f), section}];
            crc = Crc32cExtend(crc, bytes.data(), bytes.size());
          }
        }
        const bool right_checksum = input.Bool();
        v1::UpdateEnd end;
        end.set_crc32c(right_checksum ? crc : crc ^ (input.Raw<uint32_t>() | 1));
        const bool was_active = assembler.active();
        // A root decides alone: End's completion runs inline.
        std::optional<absl::StatusOr<UpdateAssembler::Counted>> answer;
        absl::Status ended = assembler.End(end, [&answer](absl::StatusOr<UpdateAssembler::Counted> c) { answer = c; });
        FUZZ_CHECK(!assembler.active());
        FUZZ_CHECK(ended.ok() == answer.has_value());
        absl::StatusOr<int64_t> counted =
            !ended.ok() ? absl::StatusOr<int64_t>(ended)
                        : (answer->ok() ? absl::StatusOr<int64_t>((*answer)->contributions)
                                        : absl::StatusOr<int64_t>(answer->status()));
        if (counted.ok()) {
          FUZZ_CHECK(was_active && right_checksum);
          FUZZ_CHECK(*counted == before + 1 && node->contributions() == before + 1);
          FUZZ_CHECK(node->aggregation->HasCounted(client));
        } else {
          FUZZ_CHECK(!(right_checksum && counted.status().code() == absl::StatusCode::kDataLoss));
          FUZZ_CHECK(node->contributions() == before);
        }
        accepted.clear();
        declared.clear();
        continue;
      }
    }
    FUZZ_CHECK(node->contributions() == before);  // only an end counts
  }
  return 0;
}
