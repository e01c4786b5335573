//===- drt/Function.h - The tiny element-wise function model ----*- C++ -*-===//
//
// A Function is a list of element-wise nodes over named placeholders. It is
// just enough to produce outputs on a device: add, mul, relu, scale and copy
// over every element kind. A placeholder written by a node is an output; every
// other placeholder is an input. Nodes run in order, so a later node may read
// an earlier node's output.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FUNCTION_H
#define DRT_FUNCTION_H

#include "drt/Error.h"
#include "drt/Type.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace drt {

/// The element-wise operations.
enum class OpKind { Add, Mul, Relu, Scale, Copy };

/// The op's name as used in scenario files ("add", "mul", ...).
std::string_view opKindName(OpKind op);
/// Parses a name produced by opKindName.
std::optional<OpKind> parseOpKind(std::string_view name);
/// Number of inputs the op reads (2 for add and mul, else 1).
unsigned opArity(OpKind op);

/// A named, typed slot that a tensor is bound to at run time.
struct Placeholder {
  std::string name;
  Type type;
};

/// One element-wise operation: output[i] = op(inputs[0][i], inputs[1][i]).
///
/// Semantics, identical on every backend (docs/semantics.md section 7):
/// integer add, mul and scale wrap modulo 2^bits (u8 modulo 256); relu(x) =
/// x > 0 ? x : 0 (+0 for a float NaN or -0); float results are the exact
/// result rounded once to the element kind, to nearest even, with no
/// contraction and with denormals kept; scale multiplies by \p factor
/// converted to the element kind (rounded to nearest float32, then for f16
/// and bf16 to the kind; for integer kinds the factor must be an integer that
/// the kind holds); copy moves bits. The payload of a NaN result is
/// unspecified (devices return their canonical NaN). A node may not read its
/// own output.
struct Node {
  OpKind op = OpKind::Copy;
  std::vector<std::string> inputs;
  std::string output;
  double factor = 1.0;
};

/// A named function: placeholders and the nodes that compute its outputs.
class Function {
public:
  Function() = default;
  explicit Function(std::string name) : name_(std::move(name)) {}

  /// The function's (network's) name.
  const std::string &name() const { return name_; }
  /// Adds a placeholder; returns *this for chaining.
  Function &addPlaceholder(std::string name, Type type);
  /// Adds a node; returns *this for chaining.
  Function &addNode(Node node);

  /// The placeholders, in the order they were added.
  const std::vector<Placeholder> &placeholders() const { return placeholders_; }
  /// The nodes, in execution order.
  const std::vector<Node> &nodes() const { return nodes_; }
  /// The placeholder named \p name, or nullptr.
  const Placeholder *findPlaceholder(std::string_view name) const;
  /// Index of the placeholder named \p name, or -1.
  int placeholderIndex(std::string_view name) const;
  /// True when some node writes placeholder \p name.
  bool isOutput(std::string_view name) const;
  /// Names of the output placeholders, in placeholder order.
  std::vector<std::string> outputNames() const;
  /// Names of the input placeholders, in placeholder order.
  std::vector<std::string> inputNames() const;

  /// Checks that the function is well formed: a non-empty name, unique
  /// placeholder names with elements (any element kind), nodes naming known
  /// placeholders of one type with the op's arity, an output written by one
  /// node only and not read before it is written, finite scale factors, and
  /// for integer kinds scale factors that are integers the kind holds.
  /// Returns InvalidArgument naming the function and the offending part.
  Error verify() const;

private:
  std::string name_;
  std::vector<Placeholder> placeholders_;
  std::vector<Node> nodes_;
};

} // namespace drt

#endif // DRT_FUNCTION_H
