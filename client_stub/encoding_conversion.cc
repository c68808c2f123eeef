// Converting a field's value between the dense, sparse COO and row-sparse encodings, and
// into its declared value encoding.
#include "client_stub/encoding_conversion.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/half_float.h"
#include "service/core/status_macros.h"
#include "service/core/update_clipping.h"
#include "service/core/update_validator.h"
#include "service/core/value_encoder.h"

namespace fedagg {
namespace {

// Elements in one row of dimension 0, which row ids index (the field's rank is ≥ 1).
int64_t ElementsPerRow(const TensorType& type) {
  return type.shape[0] == 0 ? 0 : type.num_elements() / type.shape[0];
}

absl::Status CheckBounds(const FieldSpec& field, absl::Span<const int64_t> ids, int64_t limit, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit) {
      return FieldError(field, absl::StrCat(what, " ", ids[i], " at position ", i, " is out of range [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

// Checks `input` as a value of its own encoding for `field`; returns the number of values
// each of its indices carries (1 for dense and COO, a row's elements for row-sparse).
absl::StatusOr<int64_t> CheckInput(const FieldSpec& field, const FieldValue& input) {
  const size_t element_size = DTypeSize(input.dtype);
  if (input.values.size() % element_size != 0) {
    return FieldError(field, absl::StrCat(input.values.size(), " bytes of values are not a whole number of ",
                                          DTypeName(input.dtype), " elements"));
  }
  const uint64_t count = input.values.size() / element_size;
  const int64_t elements = field.type.num_elements();
  switch (input.encoding) {
    case Encoding::kDense:
      if (!input.indices.empty()) return FieldError(field, "a dense value carries no indices");
      if (count != static_cast<uint64_t>(elements)) {
        return FieldError(field, absl::StrCat("a dense value of ", count, " elements; the field has ", elements));
      }
      return 1;
    case Encoding::kSparse:
      if (count != input.indices.size()) {
        return FieldError(field, absl::StrCat(input.indices.size(), " indices but ", count,
                                              " values; send one value per index"));
      }
      FEDAGG_RETURN_IF_ERROR(CheckBounds(field, input.indices, elements, "index"));
      return 1;
    case Encoding::kRowSparse: {
      if (field.type.shape.empty()) {
        return FieldError(field, "a scalar field has no rows; send it dense, or as indices and values");
      }
      const int64_t width = ElementsPerRow(field.type);
      if (count != input.indices.size() * static_cast<uint64_t>(width)) {
        return FieldError(field, absl::StrCat(input.indices.size(), " row ids need as many rows of ", width,
                                              " elements (", input.indices.size() * width, " values), got ",
                                              count, " values"));
      }
      FEDAGG_RETURN_IF_ERROR(CheckBounds(field, input.indices, field.type.shape[0], "row id"));
      return width;
    }
  }
  return absl::InternalError("unknown encoding");
}

template <typename T>
T Load(const std::byte* values, int64_t i) {
  T value;
  std::memcpy(&value, values + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

// Zero, −0 included (what a dense array's "untouched" element is).
template <typename T>
bool IsZero(T value) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return ToFloat(value) == 0.0f;
  } else {
    return value == T{0};
  }
}

// a + b in T: integers wrap, float16 and bfloat16 round the float sum back to T.
template <typename T>
T Added(T a, T b) {
  if constexpr (std::is_same_v<T, Float16>) {
    return ToFloat16(ToFloat(a) + ToFloat(b));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return ToBFloat16(ToFloat(a) + ToFloat(b));
  } else {
    return cpu::Add(a, b);
  }
}

// `input` (checked; `width` values per index) in `field`'s encoding, which is another one.
template <typename T>
std::vector<T> Convert(const FieldSpec& field, const FieldValue& input, int64_t width,
                       std::vector<int64_t>& out_indices) {
  const std::byte* values = input.values.data();
  const int64_t count = static_cast<int64_t>(input.values.size() / sizeof(T));
  // Calls fn(linear index into the field, value) for every element of the input, in order.
  auto for_each_element = [&](auto&& fn) {
    if (input.encoding == Encoding::kDense) {
      for (int64_t i = 0; i < count; ++i) fn(i, Load<T>(values, i));
      return;
    }
    for (size_t k = 0; k < input.indices.size(); ++k) {
      for (int64_t j = 0; j < width; ++j) {
        const int64_t at = static_cast<int64_t>(k) * width + j;
        fn(input.indices[k] * width + j, Load<T>(values, at));
      }
    }
  };
  std::vector<T> out;
  switch (field.encoding) {
    case Encoding::kDense:
      out.assign(static_cast<size_t>(field.type.num_elements()), T{});
      for_each_element([&](int64_t at, T value) { out[at] = Added(out[at], value); });
      break;
    case Encoding::kSparse:
      for_each_element([&](int64_t at, T value) {
        if (input.encoding == Encoding::kDense && IsZero(value)) return;
        out_indices.push_back(at);
        out.push_back(value);
      });
      break;
    case Encoding::kRowSparse: {
      const int64_t row_width = ElementsPerRow(field.type);
      if (input.encoding == Encoding::kDense) {
        for (int64_t row = 0; row < field.type.shape[0]; ++row) {
          const int64_t first = row * row_width;
          bool touched = false;
          for (int64_t j = 0; j < row_width && !touched; ++j) touched = !IsZero(Load<T>(values, first + j));
          if (!touched) continue;
          out_indices.push_back(row);
          for (int64_t j = 0; j < row_width; ++j) out.push_back(Load<T>(values, first + j));
        }
        break;
      }
      // Sparse COO: the rows its indices fall in, ascending.
      for (const int64_t index : input.indices) out_indices.push_back(index / row_width);
      std::sort(out_indices.begin(), out_indices.end());
      out_indices.erase(std::unique(out_indices.begin(), out_indices.end()), out_indices.end());
      out.assign(out_indices.size() * static_cast<size_t>(row_width), T{});
      for_each_element([&](int64_t at, T value) {
        const int64_t slot = std::lower_bound(out_indices.begin(), out_indices.end(), at / row_width) -
                             out_indices.begin();
        T& element = out[slot * row_width + at % row_width];
        element = Added(element, value);
      });
      break;
    }
  }
  return out;
}

}  // namespace

FieldValue EncodedField::view() const {
  return FieldValue{encoding, values.dtype, absl::MakeConstSpan(indices), absl::MakeConstSpan(values.bytes)};
}

absl::StatusOr<EncodedField> ToDeclaredEncoding(const FieldSpec& field, const FieldValue& input) {
  FEDAGG_ASSIGN_OR_RETURN(const int64_t width, CheckInput(field, input));
  EncodedField out;
  out.encoding = field.encoding;
  out.values.dtype = input.dtype;
  if (input.encoding == field.encoding) {
    out.indices.assign(input.indices.begin(), input.indices.end());
    out.values.bytes.assign(input.values.begin(), input.values.end());
  } else {
    cpu::DispatchDType(input.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::vector<T> converted = Convert<T>(field, input, width, out.indices);
      out.values.bytes.resize(converted.size() * sizeof(T));
      if (!converted.empty()) std::memcpy(out.values.bytes.data(), converted.data(), out.values.bytes.size());
    });
  }
  out.values.shape = {static_cast<int64_t>(out.values.bytes.size() / DTypeSize(input.dtype))};
  return out;
}

absl::StatusOr<EncodedField> ToDeclaredValueEncoding(const FieldSpec& field, const FieldValue& input,
                                                     uint64_t stream) {
  if (input.encoding != field.encoding || !IsFloating(input.dtype)) {
    return FieldError(field, absl::StrCat("its values are encoded as ", field.value_encoding.ToString(),
                                          ", from floating-point values in the field's own form (",
                                          EncodingName(field.encoding), "); got ", EncodingName(input.encoding), " ",
                                          DTypeName(input.dtype), " values"));
  }
  const int64_t n = static_cast<int64_t>(input.values.size() / DTypeSize(input.dtype));
  EncodedField out;
  out.encoding = field.encoding;
  out.indices.assign(input.indices.begin(), input.indices.end());
  out.values.dtype = field.type.dtype;
  out.values.shape = field.encoding == Encoding::kDense ? field.type.shape : std::vector<int64_t>{n};
  out.values.bytes.resize(field.value_encoding.EncodedBytes(n));
  if (absl::Status status =
          EncodeValues(field.value_encoding, input.dtype, input.values, stream, absl::MakeSpan(out.values.bytes));
      !status.ok()) {
    return FieldError(field, status.message());
  }
  return out;
}

absl::StatusOr<ConvertedUpdate> ConvertedUpdate::Of(const ReductionSpec& spec, const UpdateView& update,
                                                    std::optional<uint64_t> seed) {
  ConvertedUpdate result;
  result.view_ = update;
  if (update.fields.size() != spec.fields().size()) return result;
  const uint64_t update_seed = seed.has_value() ? *seed : absl::Uniform<uint64_t>(absl::BitGen());
  // A private update with discretized fields is clipped here, before it is discretized
  // (update_clipping.h, ClientClipFactor): every field is then copied in its declared form.
  FEDAGG_ASSIGN_OR_RETURN(std::vector<EncodedField> clipped, ClippedByTheClient(spec, update));
  std::vector<size_t> converted_at;  // field numbers, in the order of converted_
  for (size_t i = 0; i < update.fields.size(); ++i) {
    const FieldSpec& declared = spec.fields()[i];
    const bool copied = !clipped.empty();
    if (!copied && update.fields[i].encoding == declared.encoding && !declared.value_encoding.encoded()) continue;
    EncodedField converted = copied ? std::move(clipped[i]) : EncodedField();
    FieldValue value = copied ? converted.view() : update.fields[i];  // in the declared encoding, once converted
    if (value.encoding != declared.encoding) {
      FEDAGG_ASSIGN_OR_RETURN(converted, ToDeclaredEncoding(declared, update.fields[i]));
      value = converted.view();
    }
    if (declared.value_encoding.encoded()) {
      FEDAGG_RETURN_IF_ERROR(CheckInput(declared, value).status());
      FEDAGG_ASSIGN_OR_RETURN(converted, ToDeclaredValueEncoding(declared, value, RoundingStream(update_seed, i)));
    }
    result.converted_.push_back(std::move(converted));
    converted_at.push_back(i);
  }
  // Views taken once every buffer has its final place.
  for (size_t k = 0; k < converted_at.size(); ++k) result.view_.fields[converted_at[k]] = result.converted_[k].view();
  return result;
}

absl::StatusOr<std::vector<EncodedField>> ConvertedUpdate::ClippedByTheClient(const ReductionSpec& spec,
                                                                            const UpdateView& update) {
  std::vector<EncodedField> fields;
  const std::vector<FieldSpec>& declared = spec.fields();
  if (!spec.options().privacy.has_value() ||
      std::none_of(declared.begin(), declared.end(), [](const FieldSpec& f) { return f.value_encoding.discretized(); })) {
    return fields;
  }
  UpdateView plain = update;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (!IsFloating(update.fields[i].dtype)) {
      return FieldError(declared[i], "a differentially private update with discretized fields is clipped by its "
                                     "client before it is discretized: give floating-point values");
    }
    FEDAGG_ASSIGN_OR_RETURN(EncodedField field, ToDeclaredEncoding(declared[i], update.fields[i]));
    fields.push_back(std::move(field));
  }
  for (size_t i = 0; i < declared.size(); ++i) plain.fields[i] = fields[i].view();
  const double factor = ClientClipFactor(spec, plain);
  if (factor < 1) {
    for (size_t i = 0; i < declared.size(); ++i) {
      ScaleFieldValues(PlainFieldSpec(declared[i], fields[i].values.dtype), plain.fields[i],
                       absl::MakeSpan(fields[i].values.bytes), factor);
    }
  }
  return fields;
}

}  // namespace fedagg
