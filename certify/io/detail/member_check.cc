#include "certify/io/detail/member_check.h"

#include <algorithm>

namespace ncert::certify::detail {

void Node::text(const std::string& name, const std::optional<std::string>& value) {
  if (value) attrs.push_back({name, value, std::nullopt});
}
void Node::number(const std::string& name, const std::optional<Index>& value) {
  if (value) attrs.push_back({name, std::nullopt, value});
}
void Node::array(const std::string& name, const DumpArray& a) {
  if (a.present()) datasets.emplace_back(name, &a);
}
const NodeAttr* Node::attr(std::string_view name) const {
  for (const NodeAttr& a : attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}
const DumpArray* Node::dataset(std::string_view name) const {
  for (const auto& [n, a] : datasets) {
    if (n == name) return a;
  }
  return nullptr;
}

namespace {

Status refuse(ErrorCode code, const std::string& path, const std::string& message) {
  return Status(code, path + ": " + message);
}

/// A string attribute against its closed value set, refused as the reader refuses it.
Status check_value(const std::string& path, const MemberRule& rule, const std::string& value) {
  const ValueSet& set = rule.values;
  if (set.names.empty()) return Status();
  if (std::find(set.names.begin(), set.names.end(), value) != set.names.end()) return Status();
  if (set.what.empty()) {
    return refuse(
        set.refused, path,
        std::string(rule.name) + " = \"" + value + "\"; only \"" + std::string(set.names.front()) + "\" is defined");
  }
  std::string names;
  for (std::string_view n : set.names) names += (names.empty() ? "" : ", ") + std::string(n);
  return refuse(set.refused, path, std::string(set.what) + " \"" + value + "\" is not one of " + names);
}

}  // namespace

Status check_attributes(const Node& node, const NodeContext& context) {
  for (const MemberRule& rule : member_rules()) {
    if (rule.container != node.container || rule.kind != MemberKind::kAttribute) continue;
    const NodeAttr* a = node.attr(rule.name);
    if (!rule_applies(rule.when, context.rules)) {
      if (a) {
        return refuse(ErrorCode::kInvalidArgument, node.path,
                      "attribute \"" + std::string(rule.name) + "\" given, but it is read only when " +
                          std::string(when_name(rule.when)) + " holds: the reader would ignore it");
      }
      continue;
    }
    if (!a) {
      if (rule.required) return refuse(rule.refused, node.path, "missing attribute \"" + std::string(rule.name) + "\"");
      continue;
    }
    if (rule.type == TypeRule::kInt) {
      NCERT_ASSERT(a->number.has_value(), "an integer rule written as a string");
      if (*a->number < rule.min_value) {
        return refuse(ErrorCode::kAttributeInvalid, node.path,
                      "attribute \"" + std::string(rule.name) + "\" = " + std::to_string(*a->number) + " is below " +
                          std::to_string(rule.min_value));
      }
      // The reader's extent limit, with its code and words (an outside engine's k = 2^33 read
      // shape-mismatch here and shape-limit in ncert check).
      if (rule.min_value >= 0 && *a->number > kMaxShapeValue) {
        return refuse(ErrorCode::kShapeLimit, node.path,
                      "attribute \"" + std::string(rule.name) + "\" = " + std::to_string(*a->number) + " is above " +
                          std::to_string(kMaxShapeValue) +
                          " (2^32 - 1), the largest extent ncert accepts; refused before any size is computed from it");
      }
    } else {
      NCERT_ASSERT(a->text.has_value(), "a string rule written as an integer");
      if (a->text->find('\0') != std::string::npos) {
        return refuse(ErrorCode::kAttributeInvalid, node.path,
                      "attribute \"" + std::string(rule.name) + "\" holds a NUL: the reader would cut it there");
      }
      NCERT_RETURN_IF_ERROR(check_value(node.path, rule, *a->text));
    }
  }
  for (const NodeAttr& a : node.attrs) {
    const bool known = std::any_of(member_rules().begin(), member_rules().end(), [&](const MemberRule& r) {
      return r.container == node.container && r.kind == MemberKind::kAttribute && r.name == a.name;
    });
    NCERT_ASSERT(known, "the builder writes only attributes the rules name");
  }
  return Status();
}

Status check_array(const std::string& path, const DumpArray& a, const std::vector<DType>& allowed,
                   const std::optional<std::vector<Index>>& expected, std::string_view allowed_prose,
                   const std::vector<Dim>* dims) {
  if (a.given() != element_storage(a.dtype())) {
    return refuse(ErrorCode::kInvalidArgument, path,
                  std::string(element_storage_name(a.given())) + " elements declared " +
                      std::string(dtype_name(a.dtype())) + "; " + std::string(dtype_name(a.dtype())) +
                      " is stored as " + std::string(element_storage_name(element_storage(a.dtype()))) +
                      " (the writer never converts: round the values to the declared type first)");
  }
  constexpr std::size_t kMaxRank = 32;  // §7: a rank above 32 is refused
  if (a.shape().size() > kMaxRank) {
    return refuse(ErrorCode::kShapeMismatch, path, "rank " + std::to_string(a.shape().size()) + " above 32");
  }
  Index count = 1;
  for (Index d : a.shape()) {
    if (d < 0) return refuse(ErrorCode::kInvalidArgument, path, "negative extent in shape " + shape_text(a.shape()));
    if (d != 0 && count > INT64_MAX / d) {
      return refuse(ErrorCode::kSizeOverflow, path, "shape " + shape_text(a.shape()) + " overflows 64 bits");
    }
    count *= d;
  }
  if (count != a.count()) {
    return refuse(ErrorCode::kInvalidArgument, path,
                  "shape " + shape_text(a.shape()) + " holds " + std::to_string(count) + " elements but " +
                      std::to_string(a.count()) + " were given");
  }
  if (a.count() > 0 && a.data() == nullptr) {
    return refuse(ErrorCode::kInvalidArgument, path, "no data for " + std::to_string(a.count()) + " elements");
  }
  if (std::find(allowed.begin(), allowed.end(), a.dtype()) == allowed.end()) {
    if (!allowed_prose.empty()) {
      return refuse(ErrorCode::kDatatypeRefused, path,
                    "dtype " + std::string(dtype_name(a.dtype())) + std::string(allowed_prose));
    }
    return refuse(ErrorCode::kDatatypeRefused, path,
                  "dtype " + std::string(dtype_name(a.dtype())) + " where " + dtype_list(allowed) + " is required");
  }
  if (expected) {
    bool match = a.shape().size() == expected->size();
    for (std::size_t i = 0; match && i < expected->size(); ++i) {
      match = (*expected)[i] < 0 || (*expected)[i] == a.shape()[i];
    }
    if (!match) {
      return refuse(ErrorCode::kShapeMismatch, path, shape_mismatch_text(a.shape(), *expected, dims));
    }
  }
  return Status();
}

Status check_datasets(const Node& node, NodeContext& context,
                      const std::function<void(std::string_view, const DumpArray&, NodeContext&)>& known) {
  for (const MemberRule& rule : member_rules()) {
    if (rule.container != node.container || rule.kind != MemberKind::kDataset || rule.name.empty()) continue;
    const DumpArray* a = node.dataset(rule.name);
    const std::string path = node.path + "/" + std::string(rule.name);
    if (!rule_applies(rule.when, context.rules)) {
      if (a) {
        return refuse(ErrorCode::kInvalidArgument, path,
                      "given, but it is read only when " + std::string(when_name(rule.when)) +
                          " holds: the reader would ignore it");
      }
      continue;
    }
    if (!a) {
      if (rule.required) return refuse(rule.refused, node.path, "missing dataset \"" + std::string(rule.name) + "\"");
      continue;
    }
    NCERT_RETURN_IF_ERROR(check_array(path, *a, allowed_dtypes(rule, context.types),
                                      expected_shape(rule, context.symbols), {}, &rule.dims));
    known(rule.name, *a, context);
  }
  for (const auto& [name, a] : node.datasets) {
    NCERT_ASSERT(is_member_name(node.container, name), "the builder writes only datasets the rules name");
  }
  return Status();
}

}  // namespace ncert::certify::detail
