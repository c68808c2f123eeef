// TFF-style value types: TensorType (dtype + static shape) and StructType (ordered,
// optionally named fields, nested). A client update is a value of its aggregation's
// declared type. ToString() prints TFF's compact notation, e.g. <w=float32[10,5],b=float32[5]>,
// and is used in every error message about types.
#ifndef FEDAGG_SERVICE_CORE_VALUE_TYPE_H_
#define FEDAGG_SERVICE_CORE_VALUE_TYPE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/core/dtype.h"

namespace fedagg {

struct TensorType {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty = scalar

  int64_t num_elements() const;
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype); }
  std::string ToString() const;  // "float32[10,5]"
  bool operator==(const TensorType&) const = default;
};

class ValueType;

struct StructField {
  std::string name;  // empty = unnamed
  std::shared_ptr<const ValueType> type;
};

// A tensor type or a struct of value types. Immutable once built.
class ValueType {
 public:
  static ValueType Tensor(DType dtype, std::vector<int64_t> shape);
  static ValueType Struct(std::vector<std::pair<std::string, ValueType>> fields);

  bool is_tensor() const { return tensor_.has_value(); }
  const TensorType& tensor() const { return *tensor_; }
  const std::vector<StructField>& fields() const { return fields_; }

  std::string ToString() const;
  bool operator==(const ValueType& other) const;

  // Checks that the type can be aggregated: every dimension >= 0, sizes fit in int64,
  // names unique within a struct, no empty struct.
  absl::Status Validate() const;

 private:
  std::optional<TensorType> tensor_;
  std::vector<StructField> fields_;
};

// One tensor leaf of a value type, in depth-first order, with its dotted path
// ("encoder.w", or "[1]" for an unnamed field at position 1).
struct LeafField {
  std::string path;
  TensorType type;
};

std::vector<LeafField> FlattenLeaves(const ValueType& type);

// Parses TFF's compact notation back into a type: "float32[3]", "<a=int64,b=<float32[2,2]>>".
absl::StatusOr<ValueType> ParseValueType(absl::string_view text);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_VALUE_TYPE_H_
