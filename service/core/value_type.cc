// TFF-style value types: construction, validation, printing, parsing and flattening.
#include "service/core/value_type.h"

#include <cctype>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/core/status_macros.h"

namespace fedagg {

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::ToString() const {
  std::string out(DTypeName(dtype));
  if (!shape.empty()) absl::StrAppend(&out, "[", absl::StrJoin(shape, ","), "]");
  return out;
}

ValueType ValueType::Tensor(DType dtype, std::vector<int64_t> shape) {
  ValueType type;
  type.tensor_ = TensorType{dtype, std::move(shape)};
  return type;
}

ValueType ValueType::Struct(std::vector<std::pair<std::string, ValueType>> fields) {
  ValueType type;
  for (auto& [name, field_type] : fields) {
    type.fields_.push_back(
        StructField{std::move(name), std::make_shared<const ValueType>(std::move(field_type))});
  }
  return type;
}

std::string ValueType::ToString() const {
  if (is_tensor()) return tensor_->ToString();
  std::vector<std::string> parts;
  for (const StructField& field : fields_) {
    parts.push_back(field.name.empty() ? field.type->ToString()
                                       : absl::StrCat(field.name, "=", field.type->ToString()));
  }
  return absl::StrCat("<", absl::StrJoin(parts, ","), ">");
}

bool ValueType::operator==(const ValueType& other) const {
  if (is_tensor() != other.is_tensor()) return false;
  if (is_tensor()) return *tensor_ == *other.tensor_;
  if (fields_.size() != other.fields_.size()) return false;
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name != other.fields_[i].name) return false;
    if (!(*fields_[i].type == *other.fields_[i].type)) return false;
  }
  return true;
}

namespace {

absl::Status ValidateTensor(const TensorType& tensor, const std::string& path) {
  int64_t elements = 1;
  for (int64_t dim : tensor.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat("field '", path, "' of type ",
                                                     tensor.ToString(), " has a negative dimension"));
    }
    if (dim != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", path, "' of type ", tensor.ToString(), " is too large"));
    }
    elements *= dim;
  }
  return absl::OkStatus();
}

bool IsIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

absl::Status ValidateRecursive(const ValueType& type, const std::string& path) {
  if (type.is_tensor()) return ValidateTensor(type.tensor(), path.empty() ? "value" : path);
  if (type.fields().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("struct '", path.empty() ? "<root>" : path, "' has no fields"));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < type.fields().size(); ++i) {
    const StructField& field = type.fields()[i];
    if (!field.name.empty() && !IsIdentifier(field.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field name '", field.name, "' in struct '", path.empty() ? "<root>" : path,
          "' is not an identifier: use letters, digits and '_', not starting with a digit"));
    }
    if (!field.name.empty() && !names.insert(field.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("struct ", type.ToString(),
                                                     " has two fields named '", field.name, "'"));
    }
    const std::string child =
        field.name.empty() ? absl::StrCat(path, "[", i, "]")
                           : (path.empty() ? field.name : absl::StrCat(path, ".", field.name));
    FEDAGG_RETURN_IF_ERROR(ValidateRecursive(*field.type, child));
  }
  return absl::OkStatus();
}

void FlattenInto(const ValueType& type, const std::string& path, std::vector<LeafField>* out) {
  if (type.is_tensor()) {
    out->push_back(LeafField{path.empty() ? "value" : path, type.tensor()});
    return;
  }
  for (size_t i = 0; i < type.fields().size(); ++i) {
    const StructField& field = type.fields()[i];
    const std::string child =
        field.name.empty() ? absl::StrCat(path, "[", i, "]")
                           : (path.empty() ? field.name : absl::StrCat(path, ".", field.name));
    FlattenInto(*field.type, child, out);
  }
}

// Recursive-descent parser over TFF's compact notation.
class TypeParser {
 public:
  explicit TypeParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<ValueType> ParseAll() {
    FEDAGG_ASSIGN_OR_RETURN(ValueType type, ParseValue());
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected trailing text");
    return type;
  }

 private:
  absl::StatusOr<ValueType> ParseValue() {
    SkipSpaces();
    if (Consume('<')) return ParseStruct();
    return ParseTensor();
  }

  absl::StatusOr<ValueType> ParseStruct() {
    std::vector<std::pair<std::string, ValueType>> fields;
    SkipSpaces();
    if (Consume('>')) return ValueType::Struct(std::move(fields));
    while (true) {
      SkipSpaces();
      std::string name;
      // A field is `name=type` or just `type`; look ahead for '='.
      size_t save = pos_;
      std::string ident = ReadIdentifier();
      SkipSpaces();
      if (!ident.empty() && Consume('=')) {
        name = ident;
      } else {
        pos_ = save;
      }
      FEDAGG_ASSIGN_OR_RETURN(ValueType field, ParseValue());
      fields.emplace_back(std::move(name), std::move(field));
      SkipSpaces();
      if (Consume(',')) continue;
      if (Consume('>')) break;
      return Error("expected ',' or '>'");
    }
    return ValueType::Struct(std::move(fields));
  }

  absl::StatusOr<ValueType> ParseTensor() {
    std::string name = ReadIdentifier();
    if (name.empty()) return Error("expected a dtype or '<'");
    absl::StatusOr<DType> dtype = ParseDType(name);
    if (!dtype.ok()) return Error(dtype.status().message());
    std::vector<int64_t> shape;
    SkipSpaces();
    if (Consume('[')) {
      while (true) {
        SkipSpaces();
        if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          return Error("expected a dimension");
        }
        int64_t dim = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          if (dim > (std::numeric_limits<int64_t>::max() - 9) / 10) return Error("dimension too large");
          dim = dim * 10 + (text_[pos_++] - '0');
        }
        shape.push_back(dim);
        SkipSpaces();
        if (Consume(',')) continue;
        if (Consume(']')) break;
        return Error("expected ',' or ']'");
      }
    }
    return ValueType::Tensor(*dtype, std::move(shape));
  }

  std::string ReadIdentifier() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  void SkipSpaces() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse type '", text_, "' at offset ", pos_, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status ValueType::Validate() const { return ValidateRecursive(*this, ""); }

std::vector<LeafField> FlattenLeaves(const ValueType& type) {
  std::vector<LeafField> leaves;
  FlattenInto(type, "", &leaves);
  return leaves;
}

absl::StatusOr<ValueType> ParseValueType(absl::string_view text) {
  FEDAGG_ASSIGN_OR_RETURN(ValueType type, TypeParser(text).ParseAll());
  FEDAGG_RETURN_IF_ERROR(type.Validate());
  return type;
}

}  // namespace fedagg
