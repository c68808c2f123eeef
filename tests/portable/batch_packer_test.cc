// The batch packer: parts that fit their slot, laid out, copied span by span as a copy
// engine would and located back, reassemble the batch exactly (dense cut by rows and by
// columns; entries cut by update and, for an update larger than a slot, by runs of one
// index); the updates' values and indices are copied straight from the batch, and only
// weights, offsets, owners and reordered entries are packed on the host; bad indices
// refuse the whole batch.
#include "portable/batch_packer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg::portable {
namespace {

ReducerSpec DenseSpec(int64_t width) {
  ReducerSpec spec;
  spec.kind = ReducerKind::kDense;
  spec.in = InType::kF32;
  spec.row_width = width;
  return spec;
}

ReducerSpec EntriesSpec(ReducerKind kind, int64_t rows, int64_t width) {
  ReducerSpec spec;
  spec.kind = kind;
  spec.in = InType::kF64;
  spec.rows = rows;
  spec.row_width = width;
  return spec;
}

// A batch in host memory, owning its arrays.
struct OwnedBatch {
  std::vector<std::vector<int64_t>> indices;
  std::vector<std::vector<double>> f64;
  std::vector<std::vector<float>> f32;
  std::vector<int64_t> entries;
  std::vector<double> weights;
  std::vector<const int64_t*> index_ptrs;
  std::vector<const void*> value_ptrs;
  std::unique_ptr<bool[]> ascending;  // per update, as validation marks it; null: not known

  HostBatch View() {
    index_ptrs.clear();
    value_ptrs.clear();
    for (size_t u = 0; u < entries.size(); ++u) {
      index_ptrs.push_back(indices.empty() ? nullptr : indices[u].data());
      value_ptrs.push_back(f32.empty() ? static_cast<const void*>(f64[u].data()) : f32[u].data());
    }
    return HostBatch{static_cast<int64_t>(entries.size()), index_ptrs.data(), entries.data(), value_ptrs.data(),
                     weights.data(), ascending.get()};
  }
};

// One part as the device sees it: the part laid out for a slot, then its spans copied into
// a second buffer (the slot's device memory, filled with 0xAB first so that a byte no span
// covers reads as garbage). `packed_bytes`: what the spans copied from the slot's host
// memory rather than from the batch.
struct StagedPart {
  BatchPacker::Layout layout;
  std::vector<std::byte> device;
  size_t packed_bytes = 0;
};

StagedPart Stage(const BatchPacker& packer, const HostBatch& batch, const BatchPacker::Part& part, size_t slot_bytes) {
  StagedPart staged;
  std::vector<std::byte> host(slot_bytes);
  std::vector<CopySpan> spans;
  staged.layout = packer.Pack(batch, part, host.data(), &spans);
  EXPECT_LE(staged.layout.bytes, slot_bytes);
  staged.device.assign(slot_bytes, std::byte{0xAB});
  for (const CopySpan& span : spans) {
    EXPECT_GT(span.bytes, 0u);
    EXPECT_LE(span.to + span.bytes, staged.layout.bytes) << "a span beyond the part's layout";
    const std::byte* from = static_cast<const std::byte*>(span.from);
    if (from >= host.data() && from < host.data() + host.size()) staged.packed_bytes += span.bytes;
    std::memcpy(staged.device.data() + span.to, from, span.bytes);
  }
  return staged;
}

OwnedBatch DenseBatch(int64_t updates, int64_t width) {
  OwnedBatch batch;
  for (int64_t u = 0; u < updates; ++u) {
    std::vector<float> row(static_cast<size_t>(width));
    for (int64_t j = 0; j < width; ++j) row[j] = static_cast<float>(u * 100000 + j);
    batch.f32.push_back(std::move(row));
    batch.entries.push_back(width);
    batch.weights.push_back(1.0 + static_cast<double>(u));
  }
  return batch;
}

// Packs every part into its own slot and reads the dense matrix back.
std::vector<std::vector<float>> UnpackDense(const BatchPacker& packer, const HostBatch& batch,
                                            const BatchPacker::Plan& plan, size_t slot_bytes, int64_t width,
                                            std::vector<double>* weights) {
  std::vector<std::vector<float>> rows(static_cast<size_t>(batch.updates), std::vector<float>(width, -1.0f));
  weights->assign(static_cast<size_t>(batch.updates), -1.0);
  int64_t last_row_begin = -1;
  for (const BatchPacker::Part& part : plan.parts) {
    EXPECT_GE(part.row_begin, last_row_begin) << "parts must go row range by row range";
    last_row_begin = part.row_begin;
    const StagedPart part_on_device = Stage(packer, batch, part, slot_bytes);
    // Only the weights were packed on the host: the values went straight from the updates.
    EXPECT_EQ(part_on_device.packed_bytes, static_cast<size_t>(part.row_end - part.row_begin) * sizeof(double));
    const StagedBatch staged = BatchPacker::Locate(part_on_device.layout, part_on_device.device.data());
    const float* values = static_cast<const float*>(staged.values);
    for (int64_t r = 0; r < staged.updates; ++r) {
      for (int64_t c = 0; c < staged.columns; ++c) {
        rows[part.row_begin + r][staged.column_begin + c] = values[r * staged.columns + c];
      }
      (*weights)[part.row_begin + r] = staged.weights[r];
    }
  }
  return rows;
}

TEST(BatchPackerTest, DenseBatchThatFitsIsOnePart) {
  OwnedBatch owned = DenseBatch(4, 100);
  const HostBatch batch = owned.View();
  const BatchPacker packer(DenseSpec(100));
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, 1 << 16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->parts.size(), 1u);
  std::vector<double> weights;
  EXPECT_EQ(UnpackDense(packer, batch, *plan, 1 << 16, 100, &weights), owned.f32);
  EXPECT_EQ(weights, owned.weights);
}

TEST(BatchPackerTest, DenseBatchLargerThanASlotIsCutIntoRowRanges) {
  OwnedBatch owned = DenseBatch(10, 1000);  // 4 KB rows
  const HostBatch batch = owned.View();
  const BatchPacker packer(DenseSpec(1000));
  constexpr size_t kSlot = 12 * 1024 + 5 * 256;  // three rows a part
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, kSlot);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->parts.size(), 4u);
  for (const BatchPacker::Part& part : plan->parts) EXPECT_EQ(part.column_end - part.column_begin, 1000);
  std::vector<double> weights;
  EXPECT_EQ(UnpackDense(packer, batch, *plan, kSlot, 1000, &weights), owned.f32);
  EXPECT_EQ(weights, owned.weights);
}

TEST(BatchPackerTest, DenseRowLargerThanASlotIsCutIntoColumnRanges) {
  OwnedBatch owned = DenseBatch(3, 50000);  // 200 KB rows
  const HostBatch batch = owned.View();
  const BatchPacker packer(DenseSpec(50000));
  constexpr size_t kSlot = 64 * 1024;
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, kSlot);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->parts.size(), 3u);
  // Few rows, each longer than a slot: the parts still fill their slots (the last column
  // range of a row range aside), not a slot's worth of rows that the batch does not have.
  for (const BatchPacker::Part& part : plan->parts) {
    if (part.column_end == 50000) continue;
    const size_t bytes = static_cast<size_t>((part.row_end - part.row_begin) * (part.column_end - part.column_begin)) * 4;
    EXPECT_GE(bytes, kSlot / 2) << "a part of " << bytes << " bytes in a slot of " << kSlot;
  }
  std::vector<double> weights;
  EXPECT_EQ(UnpackDense(packer, batch, *plan, kSlot, 50000, &weights), owned.f32);
  EXPECT_EQ(weights, owned.weights);
}

// For every (update, index): the values packed, and in how many parts the pair appears.
struct Unpacked {
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> values;
  std::map<std::pair<int64_t, int64_t>, int> parts;
};

Unpacked UnpackEntries(const BatchPacker& packer, const HostBatch& batch, const BatchPacker::Plan& plan,
                       size_t slot_bytes, int64_t width) {
  Unpacked out;
  for (const BatchPacker::Part& part : plan.parts) {
    const StagedPart part_on_device = Stage(packer, batch, part, slot_bytes);
    const StagedBatch staged = BatchPacker::Locate(part_on_device.layout, part_on_device.device.data());
    // Packed on the host: the offsets and weights, and the entries of a reordered update;
    // the entries of every other update went straight from the batch.
    size_t reordered_entries = 0;
    for (const BatchPacker::Piece& piece : part.pieces) {
      if (piece.order != nullptr) reordered_entries += static_cast<size_t>(piece.count);
    }
    EXPECT_EQ(part_on_device.packed_bytes,
              static_cast<size_t>(staged.updates + 1) * sizeof(int64_t) +
                  static_cast<size_t>(staged.updates) * sizeof(double) +
                  reordered_entries * (sizeof(int64_t) + static_cast<size_t>(width) * sizeof(double)));
    EXPECT_EQ(staged.update_offsets[0], 0);
    EXPECT_EQ(staged.update_offsets[staged.updates], staged.entries);
    std::map<std::pair<int64_t, int64_t>, bool> in_part;
    for (int64_t p = 0; p < staged.updates; ++p) {
      const int64_t update = part.pieces[p].update;
      EXPECT_EQ(staged.weights[p], batch.weights[update]);
      for (int64_t e = staged.update_offsets[p]; e < staged.update_offsets[p + 1]; ++e) {
        const auto key = std::make_pair(update, staged.indices[e]);
        const double* row = static_cast<const double*>(staged.values) + e * width;
        out.values[key].insert(out.values[key].end(), row, row + width);
        in_part[key] = true;
      }
    }
    for (const auto& [key, present] : in_part) out.parts[key] += present;
  }
  return out;
}

Unpacked Expected(const OwnedBatch& owned, int64_t width) {
  Unpacked out;
  for (size_t u = 0; u < owned.entries.size(); ++u) {
    for (int64_t e = 0; e < owned.entries[u]; ++e) {
      const auto key = std::make_pair(static_cast<int64_t>(u), owned.indices[u][e]);
      const double* row = owned.f64[u].data() + e * width;
      out.values[key].insert(out.values[key].end(), row, row + width);
      out.parts[key] = 1;
    }
  }
  return out;
}

OwnedBatch EntriesBatch(const std::vector<int64_t>& entries, int64_t rows, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  OwnedBatch batch;
  for (int64_t n : entries) {
    std::vector<int64_t> indices(static_cast<size_t>(n));
    std::vector<double> values(static_cast<size_t>(n * width));
    for (auto& index : indices) index = static_cast<int64_t>(rng() % rows);  // repeats included
    for (auto& value : values) value = static_cast<double>(rng() % 1000);
    batch.indices.push_back(std::move(indices));
    batch.f64.push_back(std::move(values));
    batch.entries.push_back(n);
    batch.weights.push_back(0.5 + static_cast<double>(batch.weights.size()));
  }
  return batch;
}

TEST(BatchPackerTest, EntriesGoWholeUpdateByUpdateIntoSlots) {
  OwnedBatch owned = EntriesBatch({30, 0, 500, 7, 200}, 1000, 2, 1);
  const HostBatch batch = owned.View();
  const BatchPacker packer(EntriesSpec(ReducerKind::kScatter, 1000, 2));
  constexpr size_t kSlot = 16 * 1024;  // 24 bytes an entry: 500 entries fit, not all 737
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, kSlot);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->parts.size(), 2u);
  for (const BatchPacker::Part& part : plan->parts) {
    for (const BatchPacker::Piece& piece : part.pieces) EXPECT_EQ(piece.count, owned.entries[piece.update]);
  }
  const Unpacked got = UnpackEntries(packer, batch, *plan, kSlot, 2);
  const Unpacked want = Expected(owned, 2);
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.parts, want.parts);
}

TEST(BatchPackerTest, AnUpdateLargerThanASlotIsCutBetweenRunsOfOneIndex) {
  // 3,000 entries over 50 indices: every index repeats ~60 times within the update.
  OwnedBatch owned = EntriesBatch({40, 3000, 40}, 50, 1, 2);
  const HostBatch batch = owned.View();
  const BatchPacker packer(EntriesSpec(ReducerKind::kUnion, 50, 1));
  constexpr size_t kSlot = 8 * 1024;  // 16 bytes an entry: ~500 a part
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, kSlot);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->parts.size(), 7u);
  const Unpacked got = UnpackEntries(packer, batch, *plan, kSlot, 1);
  const Unpacked want = Expected(owned, 1);
  // Within an index the values keep the update's order (the sort was stable).
  EXPECT_EQ(got.values, want.values);
  // No (update, index) pair is spread over two parts: it still counts once.
  EXPECT_EQ(got.parts, want.parts);
}

// The device checks indices (thrust_field_reducer_test.cc): the packer stages them as
// they came, an index outside the field included, without a host pass over them.
TEST(BatchPackerTest, IndicesGoToTheDeviceAsTheyCame) {
  OwnedBatch owned = EntriesBatch({5, 5}, 100, 1, 3);
  owned.indices[1][4] = 100;
  const BatchPacker packer(EntriesSpec(ReducerKind::kScatter, 100, 1));
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(owned.View(), 1 << 16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(UnpackEntries(packer, owned.View(), *plan, 1 << 16, 1).values, Expected(owned, 1).values);
}

// A part says whether the indices of every update in it ascend: as validation marked the
// updates received as they are, and always for an update the packer ordered itself; and
// with the slot's host memory, the staged batch has the offsets on the host too.
TEST(BatchPackerTest, APartSaysWhetherEveryUpdateInItAscends) {
  OwnedBatch owned = EntriesBatch({30, 20, 3000}, 1000, 1, 5);
  const BatchPacker packer(EntriesSpec(ReducerKind::kScatter, 1000, 1));
  constexpr size_t kSlot = 8 * 1024;  // updates 0 and 1 in one part; update 2 cut into parts
  auto ascend_in_parts = [&](const HostBatch& batch) {
    absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(batch, kSlot);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<bool> ascend;
    for (const BatchPacker::Part& part : plan->parts) {
      std::vector<std::byte> host(kSlot);
      std::vector<CopySpan> spans;
      const BatchPacker::Layout layout = packer.Pack(batch, part, host.data(), &spans);
      const StagedBatch staged = BatchPacker::Locate(layout, /*base=*/nullptr, host.data());
      EXPECT_EQ(staged.updates_ascend, layout.updates_ascend);
      EXPECT_EQ(std::vector<int64_t>(staged.host_update_offsets, staged.host_update_offsets + staged.updates + 1),
                std::vector<int64_t>(reinterpret_cast<const int64_t*>(host.data() + layout.update_offsets_at),
                                     reinterpret_cast<const int64_t*>(host.data() + layout.update_offsets_at) +
                                         staged.updates + 1));
      ascend.push_back(layout.updates_ascend);
    }
    return ascend;
  };
  // Not known (no marks): only the parts of the update ordered here ascend.
  std::vector<bool> got = ascend_in_parts(owned.View());
  ASSERT_GE(got.size(), 3u);
  EXPECT_FALSE(got[0]);
  for (size_t p = 1; p < got.size(); ++p) EXPECT_TRUE(got[p]) << "part " << p << " of the ordered update";
  owned.ascending.reset(new bool[3]{true, false, false});
  EXPECT_FALSE(ascend_in_parts(owned.View())[0]) << "update 1 is not known to ascend";
  owned.ascending.reset(new bool[3]{true, true, false});
  EXPECT_TRUE(ascend_in_parts(owned.View())[0]);
  EXPECT_EQ(BatchPacker::Locate(BatchPacker::Layout{}, nullptr).host_update_offsets, nullptr);
}

TEST(BatchPackerTest, ARunOfOneIndexLargerThanASlotIsResourceExhaustedNamingTheFlag) {
  OwnedBatch owned = EntriesBatch({1000}, 1, 1, 4);  // one index, 1,000 times
  const BatchPacker packer(EntriesSpec(ReducerKind::kScatter, 1, 1));
  absl::StatusOr<BatchPacker::Plan> plan = packer.MakePlan(owned.View(), 4096);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("--staging_slot_mib"), std::string::npos) << plan.status();
}

}  // namespace
}  // namespace fedagg::portable
