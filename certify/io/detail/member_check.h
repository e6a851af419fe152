// This header defines how DumpBuilder validates one container before writing it: the container
// as a node (its attributes as the strings and integers the file will hold, its datasets as the
// caller's arrays) checked against the reader's member rules (certify/io/schema_rules.h) in the
// table's order, with the reader's codes. The rules say which members exist, when they are read,
// whether they are required, their element types and shapes; this file says nothing of its own
// about any member, only how a rule judges a value that has not been written yet.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "certify/io/dump_builder.h"
#include "certify/io/schema_rules.h"

namespace ncert::certify::detail {

/// One attribute as it will be written: a string or an integer.
struct NodeAttr {
  std::string name;
  std::optional<std::string> text;
  std::optional<Index> number;
};

/// One container about to be written.
struct Node {
  Container container = Container::kRoot;
  std::string path;  ///< "/projections/q"
  std::vector<NodeAttr> attrs;
  std::vector<std::pair<std::string, const DumpArray*>> datasets;  ///< present arrays only

  void text(const std::string& name, const std::optional<std::string>& value);
  void number(const std::string& name, const std::optional<Index>& value);
  void array(const std::string& name, const DumpArray& a);
  const NodeAttr* attr(std::string_view name) const;
  const DumpArray* dataset(std::string_view name) const;
};

/// What the rules depend on: the conditions, the type rules and the shape symbols, filled in by
/// the caller from the typed fields and updated as datasets are checked.
struct NodeContext {
  RuleContext rules;
  TypeContext types;
  ShapeSymbols symbols;
};

/// The attributes of the node against every attribute rule of its container, in table order:
/// required ones present (the rule's code), integers at least their minimum (222), enumerated
/// strings in their value set (the set's code), none given where the rule's condition does not
/// hold (invalid-argument: the reader would ignore it).
Status check_attributes(const Node& node, const NodeContext& context);

/// The datasets against every dataset rule of the container, in table order (which is the order
/// their shapes become known): required ones present (223), the caller's elements of the
/// declared type's storage and count (invalid-argument), a dtype the rule allows (220), the
/// rule's shape (224). `known` runs after each dataset passes, so that it can fill the symbols
/// the next rules need (M from x, P from selector, the scales' columns, T from tokens).
Status check_datasets(const Node& node, NodeContext& context,
                      const std::function<void(std::string_view, const DumpArray&, NodeContext&)>& known);

/// One array alone: storage and count (invalid-argument), the dtype in `allowed` (220) and the
/// extents in `expected` (-1 any; 224). For members the table holds outside a node (the tensor).
Status check_array(const std::string& path, const DumpArray& a, const std::vector<DType>& allowed,
                   const std::optional<std::vector<Index>>& expected, std::string_view allowed_prose = {},
                   const std::vector<Dim>* dims = nullptr);

}  // namespace ncert::certify::detail
