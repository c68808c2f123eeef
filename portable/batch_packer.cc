// BatchPacker: planning slot-sized parts and packing them into the staging layout.
#include "portable/batch_packer.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fedagg::portable {
namespace {

// Every array of a packed part starts on a 256-byte boundary (coalesced device reads).
constexpr size_t kAlign = 256;
constexpr size_t kArrays = 5;  // values, indices, entry updates, update offsets, weights

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// What a part may hold once every array's alignment padding is set aside.
size_t Usable(size_t slot_bytes) { return slot_bytes > kArrays * kAlign ? slot_bytes - kArrays * kAlign : 0; }

const std::byte* Bytes(const void* p) { return static_cast<const std::byte*>(p); }


}  // namespace

absl::StatusOr<BatchPacker::Plan> BatchPacker::MakePlan(const HostBatch& batch, size_t slot_bytes) const {
  if (spec_.kind == ReducerKind::kDense) {
    if (Usable(slot_bytes) < DenseUnitBytes() + sizeof(double)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a staging slot of ", slot_bytes, " bytes is too small to stage a single value",
          spec_.quantized_bits != 0 ? " block" : "", "; raise --staging_slot_mib"));
    }
    return PlanDense(batch, slot_bytes);
  }
  return PlanEntries(batch, slot_bytes);
}

int64_t BatchPacker::DenseUnitColumns() const { return spec_.quantized_bits != 0 ? spec_.block : 1; }

size_t BatchPacker::DenseUnitBytes() const {
  if (spec_.quantized_bits == 0) return InTypeBytes(spec_.in);
  return static_cast<size_t>(QuantizedRowBytes(spec_, spec_.block)) + sizeof(float);
}

BatchPacker::Plan BatchPacker::PlanDense(const HostBatch& batch, size_t slot_bytes) const {
  const size_t usable = Usable(slot_bytes);
  // A row is cut into units: a column of plain values, a block of quantized ones (its codes
  // and its scale).
  const int64_t unit_columns = DenseUnitColumns();
  const size_t unit_bytes = DenseUnitBytes();
  const int64_t width = spec_.row_width;
  const int64_t units = (width + unit_columns - 1) / unit_columns;
  const size_t row_bytes = static_cast<size_t>(units) * unit_bytes + sizeof(double);
  // Rows per part: as many of the batch's rows as fit whole; when not even one does, as
  // many as leave each a run of at least kMinColumns columns, and the columns that fill
  // the slot with those rows (a batch of few long rows goes in slot-sized parts).
  constexpr int64_t kMinColumns = 1024;
  const int64_t min_units = (kMinColumns + unit_columns - 1) / unit_columns;
  int64_t rows = std::min(static_cast<int64_t>(usable / row_bytes), batch.updates);
  int64_t columns = width;
  if (rows == 0) {
    rows = std::clamp<int64_t>(static_cast<int64_t>(usable / (min_units * unit_bytes + sizeof(double))), 1,
                               batch.updates);
    columns = static_cast<int64_t>((usable - rows * sizeof(double)) / (rows * unit_bytes)) * unit_columns;
  }
  Plan plan;
  for (int64_t r = 0; r < batch.updates; r += rows) {
    for (int64_t c = 0; c < width; c += columns) {
      Part part;
      part.row_begin = r;
      part.row_end = std::min(batch.updates, r + rows);
      part.column_begin = c;
      part.column_end = std::min(width, c + columns);
      plan.parts.push_back(std::move(part));
    }
  }
  return plan;
}

absl::StatusOr<BatchPacker::Plan> BatchPacker::PlanEntries(const HostBatch& batch, size_t slot_bytes) const {
  const size_t usable = Usable(slot_bytes);
  const size_t per_entry = static_cast<size_t>(EntryWidth()) * InTypeBytes(spec_.in) + sizeof(int64_t);
  const size_t per_update = sizeof(int64_t) + sizeof(double);  // its offset and weight
  if (usable < per_entry + per_update + sizeof(int64_t)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "one entry of this field needs ", per_entry + per_update, " bytes of a staging slot, and a slot of ",
        slot_bytes, " bytes leaves ", usable, "; raise --staging_slot_mib"));
  }
  const size_t capacity = usable - sizeof(int64_t);  // the closing offset
  Plan plan;
  size_t used = capacity;  // no part open yet
  const auto open_part = [&] {
    plan.parts.emplace_back();
    used = 0;
  };
  for (int64_t u = 0; u < batch.updates; ++u) {
    const int64_t n = batch.entries[u];
    const size_t need = static_cast<size_t>(n) * per_entry + per_update;
    if (need <= capacity) {
      if (need > capacity - used) open_part();
      plan.parts.back().pieces.push_back(Piece{u, 0, n, nullptr});
      used += need;
      continue;
    }
    // Larger than a slot: cut after ordering by index, never inside a run of one index.
    const int64_t* indices = batch.indices[u];
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [indices](int64_t a, int64_t b) { return indices[a] < indices[b]; });
    const int64_t most = static_cast<int64_t>((capacity - per_update) / per_entry);
    for (int64_t first = 0; first < n;) {
      int64_t end = std::min(n, first + most);
      while (end < n && end > first && indices[order[end]] == indices[order[end - 1]]) --end;
      if (end == first) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "update ", u, " of the batch repeats index ", indices[order[first]], " more times than one staging slot (",
            slot_bytes, " bytes) holds; raise --staging_slot_mib"));
      }
      open_part();
      plan.parts.back().pieces.push_back(Piece{u, first, end - first, order.data()});
      used = static_cast<size_t>(end - first) * per_entry + per_update;
      first = end;
    }
    plan.orders.push_back(std::move(order));  // moving keeps the buffer the pieces point into
  }
  return plan;
}

BatchPacker::Layout BatchPacker::Pack(const HostBatch& batch, const Part& part, void* slot_host,
                                      std::vector<CopySpan>* spans) const {
  std::byte* const out = static_cast<std::byte*>(slot_host);
  const auto copy = [spans](const void* from, size_t to, size_t bytes) {
    if (bytes > 0) spans->push_back(CopySpan{from, to, bytes});
  };
  // What was written into the slot's host memory at `at` goes to the same offset.
  const auto copy_packed = [&](size_t at, size_t bytes) { copy(out + at, at, bytes); };
  const size_t value_bytes = InTypeBytes(spec_.in);
  Layout layout;
  if (spec_.kind == ReducerKind::kDense && spec_.quantized_bits != 0) {
    // Each row's codes of the part's columns, then (apart) its scales of their blocks; the
    // columns start on a block, so both are whole bytes of the update's section.
    layout.updates = part.row_end - part.row_begin;
    layout.column_begin = part.column_begin;
    layout.columns = part.column_end - part.column_begin;
    const size_t part_code_bytes = static_cast<size_t>(QuantizedRowBytes(spec_, layout.columns));
    const size_t part_scale_bytes = static_cast<size_t>(QuantizedRowBlocks(spec_, layout.columns)) * sizeof(float);
    const size_t section_scale_bytes = static_cast<size_t>(QuantizedRowBlocks(spec_, spec_.row_width)) * sizeof(float);
    const size_t first_code_byte = static_cast<size_t>(QuantizedRowBytes(spec_, part.column_begin));
    const size_t first_scale_byte = static_cast<size_t>(part.column_begin / spec_.block) * sizeof(float);
    layout.values_at = 0;
    layout.with_scales = true;
    layout.scales_at = Aligned(static_cast<size_t>(layout.updates) * part_code_bytes);
    layout.weights_at = layout.scales_at + Aligned(static_cast<size_t>(layout.updates) * part_scale_bytes);
    double* weights = reinterpret_cast<double*>(out + layout.weights_at);
    for (int64_t r = part.row_begin; r < part.row_end; ++r) {
      const size_t row = static_cast<size_t>(r - part.row_begin);
      const std::byte* section = Bytes(batch.values[r]);
      copy(section + section_scale_bytes + first_code_byte, row * part_code_bytes, part_code_bytes);
      copy(section + first_scale_byte, layout.scales_at + row * part_scale_bytes, part_scale_bytes);
      weights[row] = batch.weights[r];
    }
    copy_packed(layout.weights_at, static_cast<size_t>(layout.updates) * sizeof(double));
    layout.bytes = layout.weights_at + static_cast<size_t>(layout.updates) * sizeof(double);
    return layout;
  }
  if (spec_.kind == ReducerKind::kDense) {
    layout.updates = part.row_end - part.row_begin;
    layout.column_begin = part.column_begin;
    layout.columns = part.column_end - part.column_begin;
    const size_t part_row_bytes = static_cast<size_t>(layout.columns) * value_bytes;
    layout.values_at = 0;
    layout.weights_at = Aligned(static_cast<size_t>(layout.updates) * part_row_bytes);
    double* weights = reinterpret_cast<double*>(out + layout.weights_at);
    for (int64_t r = part.row_begin; r < part.row_end; ++r) {
      copy(Bytes(batch.values[r]) + static_cast<size_t>(part.column_begin) * value_bytes,
           static_cast<size_t>(r - part.row_begin) * part_row_bytes, part_row_bytes);
      weights[r - part.row_begin] = batch.weights[r];
    }
    copy_packed(layout.weights_at, static_cast<size_t>(layout.updates) * sizeof(double));
    layout.bytes = layout.weights_at + static_cast<size_t>(layout.updates) * sizeof(double);
    return layout;
  }
  const size_t entry_bytes = static_cast<size_t>(EntryWidth()) * value_bytes;
  int64_t entries = 0;
  for (const Piece& piece : part.pieces) entries += piece.count;
  const size_t k = part.pieces.size();
  layout.with_entries = true;
  layout.updates_ascend = true;
  layout.updates = static_cast<int64_t>(k);
  layout.entries = entries;
  layout.values_at = 0;
  layout.indices_at = Aligned(static_cast<size_t>(entries) * entry_bytes);
  layout.update_offsets_at = layout.indices_at + Aligned(static_cast<size_t>(entries) * sizeof(int64_t));
  layout.weights_at = layout.update_offsets_at + Aligned((k + 1) * sizeof(int64_t));
  layout.bytes = layout.weights_at + k * sizeof(double);
  int64_t* indices = reinterpret_cast<int64_t*>(out + layout.indices_at);
  int64_t* offsets = reinterpret_cast<int64_t*>(out + layout.update_offsets_at);
  double* weights = reinterpret_cast<double*>(out + layout.weights_at);
  int64_t e = 0;
  for (size_t p = 0; p < k; ++p) {
    const Piece& piece = part.pieces[p];
    const int64_t* from_indices = batch.indices[piece.update];
    const std::byte* from_values = Bytes(batch.values[piece.update]);
    const size_t indices_to = layout.indices_at + static_cast<size_t>(e) * sizeof(int64_t);
    const size_t values_to = layout.values_at + static_cast<size_t>(e) * entry_bytes;
    offsets[p] = e;
    weights[p] = batch.weights[piece.update];
    const bool ascends = piece.order != nullptr || (batch.ascending != nullptr && batch.ascending[piece.update]);
    layout.updates_ascend = layout.updates_ascend && ascends;
    if (piece.order == nullptr) {  // a run of the update as received
      copy(from_indices + piece.first, indices_to, static_cast<size_t>(piece.count) * sizeof(int64_t));
      copy(from_values + static_cast<size_t>(piece.first) * entry_bytes, values_to,
           static_cast<size_t>(piece.count) * entry_bytes);
    } else {  // reordered: packed here
      for (int64_t i = 0; i < piece.count; ++i) {
        const int64_t from = piece.order[piece.first + i];
        indices[e + i] = from_indices[from];
        std::memcpy(out + values_to + static_cast<size_t>(i) * entry_bytes,
                    from_values + static_cast<size_t>(from) * entry_bytes, entry_bytes);
      }
      copy_packed(indices_to, static_cast<size_t>(piece.count) * sizeof(int64_t));
      copy_packed(values_to, static_cast<size_t>(piece.count) * entry_bytes);
    }
    e += piece.count;
  }
  offsets[k] = e;
  copy_packed(layout.update_offsets_at, (k + 1) * sizeof(int64_t));
  copy_packed(layout.weights_at, k * sizeof(double));
  return layout;
}

StagedBatch BatchPacker::Locate(const Layout& layout, const void* base, const void* host_base) {
  const std::byte* at = static_cast<const std::byte*>(base);
  StagedBatch batch;
  batch.updates = layout.updates;
  batch.entries = layout.entries;
  batch.column_begin = layout.column_begin;
  batch.columns = layout.columns;
  batch.values = at + layout.values_at;
  batch.weights = reinterpret_cast<const double*>(at + layout.weights_at);
  if (layout.with_scales) batch.scales = reinterpret_cast<const float*>(at + layout.scales_at);
  if (layout.with_entries) {
    batch.indices = reinterpret_cast<const int64_t*>(at + layout.indices_at);
    batch.update_offsets = reinterpret_cast<const int64_t*>(at + layout.update_offsets_at);
    if (host_base != nullptr) {
      batch.host_update_offsets =
          reinterpret_cast<const int64_t*>(static_cast<const std::byte*>(host_base) + layout.update_offsets_at);
    }
    batch.updates_ascend = layout.updates_ascend;
  }
  return batch;
}

}  // namespace fedagg::portable
