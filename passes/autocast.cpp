// autocast{policy=NAME}: an f32 program in mixed precision. Each op that
// reads f32 values computes in the dtype its policy (core/precision_policy.h)
// says: Low ops (products, convolutions) in the policy's 16-bit dtype, Full
// ones in f32, the rest in the widest dtype of their operands, splat
// constants aside (PyTorch's autocast rules, with its scalars' "weak" type).
// A cast goes in where a value's dtype differs from what its reader computes
// in, once a value and dtype; casts read any dtype as they are; the
// program's outputs keep their dtypes. Fusion then takes the casts into the
// kernels around them.
#include <map>

#include "core/graph_builder.h"
#include "core/pass.h"
#include "core/precision_policy.h"

namespace lazylab {
namespace {

class Autocast {
 public:
  Autocast(const Graph& graph, const PrecisionPolicy& policy) : graph_(graph), policy_(policy) {}

  Expected<Graph> run() {
    mapped_.assign(graph_.size(), 0);
    for (NodeId id = 0; id < graph_.size(); ++id) {
      auto node = rebuilt(graph_.node(id));
      if (!node) return node.error();
      mapped_[id] = *node;
    }
    std::vector<NodeId> roots;
    for (NodeId root : graph_.roots()) {
      auto id = in_dtype(mapped_[root], graph_.node(root).type.dtype);
      if (!id) return id.error();
      roots.push_back(*id);
    }
    builder_.graph().set_roots(std::move(roots));
    return std::move(builder_.graph());
  }

  bool changed() const { return changed_; }

 private:
  bool reads_f32(const Node& node) const {
    for (NodeId operand : node.operands)
      if (graph_.node(operand).type.dtype == DType::F32) return true;
    return false;
  }

  // The dtype the node's f32 operands are read in (and an f32 result made in).
  DType compute_dtype(const Node& node) const {
    switch (policy_.precision_of(node)) {
      case Precision::Low: return policy_.low_dtype();
      case Precision::Full: return DType::F32;
      case Precision::Follow: break;
    }
    DType widest = policy_.low_dtype();
    for (NodeId operand : node.operands) {
      if (graph_.node(operand).op == OpId::Constant || graph_.node(operand).type.dtype != DType::F32) continue;
      if (builder_.type(mapped_[operand]).dtype == DType::F32) widest = DType::F32;
    }
    return widest;
  }

  Expected<NodeId> rebuilt(const Node& node) {
    bool retyped = node.op != OpId::Cast && reads_f32(node);
    DType compute = retyped ? compute_dtype(node) : DType::F32;
    Operands operands;
    for (NodeId operand : node.operands) {
      DType original = graph_.node(operand).type.dtype;
      // A cast reads its operand as it is; other readers take an f32 operand in
      // their compute dtype and any other as it was.
      DType wanted = node.op == OpId::Cast               ? builder_.type(mapped_[operand]).dtype
                     : original == DType::F32 && retyped ? compute
                                                         : original;
      auto id = in_dtype(mapped_[operand], wanted);
      if (!id) return id.error();
      operands.push_back(*id);
    }
    if (!retyped || compute == DType::F32) return builder_.add_typed(node.op, node.type, operands, node.attrs);
    changed_ = true;
    TensorType type{node.type.dtype == DType::F32 ? compute : node.type.dtype, node.type.shape};
    return builder_.add(node.op, operands, node.attrs, &type);
  }

  // `id` as `dtype`: itself, or a cast of it (one a value and dtype).
  Expected<NodeId> in_dtype(NodeId id, DType dtype) {
    if (builder_.type(id).dtype == dtype) return id;
    auto [at, fresh] = casts_.try_emplace({id, dtype}, 0);
    if (!fresh) return at->second;
    TensorType type{dtype, builder_.type(id).shape};
    auto cast = builder_.add(OpId::Cast, {id}, {}, &type);
    if (!cast) return cast.error();
    changed_ = true;
    return at->second = *cast;
  }

  const Graph& graph_;
  const PrecisionPolicy& policy_;
  GraphBuilder builder_;
  std::vector<NodeId> mapped_;
  std::map<std::pair<NodeId, DType>, NodeId> casts_;
  bool changed_ = false;
};

Expected<bool> autocast(Module& module, PrecisionPolicy& policy) {
  Autocast pass(module.graph, policy);
  auto graph = pass.run();
  if (!graph) return graph.error();
  if (pass.changed()) replace_graph(module, std::move(*graph));
  return pass.changed();
}

LAZYLAB_REGISTER_PASS(registry_pass<PrecisionPolicyInfo>(
    "autocast", "Run an f32 program in mixed precision: each op in the dtype a precision policy gives it",
    PassStage::Graph, "policy", "products", "precision policy", autocast));

}  // namespace
}  // namespace lazylab
