#include "graph_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/graph_builder.h"

namespace lazylab {
namespace {

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& options) : rng_(seed), options_(options) {}

  Graph run() {
    int target = pick(options_.min_ops, options_.max_ops);
    for (int i = 0; i < 2; ++i) fresh_parameter(random_type(DType::F32, 1));
    for (int made = 0, tries = 0; made < target && tries < 40 * target; ++tries)
      if (try_op(static_cast<OpId>(pick(0, kNumOps - 1)))) ++made;
    Graph graph = std::move(builder_.graph());
    // One or two roots: the last op, and at times one from the middle.
    std::vector<NodeId> roots = {static_cast<NodeId>(graph.size() - 1)};
    if (flip() && graph.size() > 3) roots.push_back(static_cast<NodeId>(pick(0, static_cast<int>(graph.size()) - 2)));
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    graph.set_roots(std::move(roots));
    return graph;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool flip() { return pick(0, 1) == 1; }

  // Scalars are rare: most bugs live in indexing.
  TensorType random_type(DType dtype, int min_rank = 0) {
    Dims shape(pick(0, 5) == 0 ? min_rank : pick(std::max(1, min_rank), options_.max_rank));
    for (int64_t& d : shape) d = pick(1, static_cast<int>(options_.max_dim));
    return {dtype, shape};
  }
  // Mostly f32; otherwise any dtype of the table.
  DType random_dtype() {
    return pick(0, 5) < 3 ? DType::F32 : kAllDTypes[pick(0, static_cast<int>(std::size(kAllDTypes)) - 1)];
  }

  NodeId fresh_parameter(const TensorType& type) {
    Attrs attrs;
    attrs[0].i = parameters_++;
    NodeId id = builder_.add_typed(OpId::Parameter, type, {}, attrs);
    values_.push_back(id);
    return id;
  }

  // Mostly ordinary values; sometimes a value that breaks naive code. Not
  // magnitudes whose squares leave f32's range: there a composite op the
  // interpreter evaluates whole and its f32 decomposition legitimately part.
  // A constant's value: special floats, or for an integer dtype small
  // values and the edges of every integer dtype that fits in it (i64's
  // most negative value over -1 must wrap; doubles past 2^53 are not exact).
  AttrValue constant_value(DType dtype) {
    static const double kSpecialFloats[] = {0.0,
                                            -0.0,
                                            1.0,
                                            -1.0,
                                            0.5,
                                            3.0,
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity(),
                                            std::numeric_limits<double>::quiet_NaN(),
                                            1e-6,
                                            1000.0};
    static const int64_t kSpecialIntegers[] = {0,
                                               1,
                                               -1,
                                               3,
                                               -3,
                                               -128,
                                               127,
                                               255,
                                               std::numeric_limits<int32_t>::min(),
                                               std::numeric_limits<int32_t>::max(),
                                               std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::min() + 1,
                                               std::numeric_limits<int64_t>::max(),
                                               (int64_t{1} << 53) + 1};
    if (is_float(dtype)) return scalar_attr(dtype, kSpecialFloats[pick(0, std::size(kSpecialFloats) - 1)]);
    if (dtype == DType::Bool) return integer_scalar_attr(dtype, pick(0, 1));
    // Each dtype its own edges and those of the narrower ones (wrapped where they do not fit).
    int last = dtype_size(dtype) == 1   ? 7
               : dtype_size(dtype) == 4 ? 9
                                        : static_cast<int>(std::size(kSpecialIntegers)) - 1;
    return integer_scalar_attr(dtype, kSpecialIntegers[pick(0, last)]);
  }

  // An existing value, preferring recent ones so the graph is deep.
  NodeId any_value() {
    int n = static_cast<int>(values_.size());
    return values_[pick(std::max(0, n - 6), n - 1)];
  }
  // A value of exactly `type`: an existing one, a constant, or a parameter.
  NodeId value_of(const TensorType& type) {
    std::vector<NodeId> same;
    for (NodeId id : values_)
      if (builder_.type(id) == type) same.push_back(id);
    if (!same.empty() && pick(0, 3) > 0) return same[pick(0, static_cast<int>(same.size()) - 1)];
    if (flip()) return builder_.constant(constant_value(type.dtype), type);
    return fresh_parameter(type);
  }

  bool commit(Expected<NodeId> id) {
    if (!id) return false;
    values_.push_back(*id);
    return true;
  }

  bool try_op(OpId op) {
    const OpInfo& info = op_info(op);
    NodeId x = any_value();
    TensorType t = builder_.type(x);  // a copy: adding nodes moves the graph's storage
    Attrs attrs;
    switch (info.type_rule) {
      case TypeRule::Declared: return try_declared(op, x);
      case TypeRule::Compare:
        // Against a fresh input: two computed values that are equal in exact
        // arithmetic differ by an ulp between backends (exp, log, sums), and
        // a comparison turns that into true against false.
        return commit(builder_.add(op, {x, fresh_parameter(t)}, attrs));
      case TypeRule::Same: {
        for (int k = 0; k < info.num_attrs; ++k) {
          if (info.attrs[k].kind == AttrKind::Int) attrs[k].i = t.rank() ? pick(0, static_cast<int>(t.rank()) - 1) : 0;
          if (info.attrs[k].kind == AttrKind::Float) attrs[k].f = 1e-5;  // an epsilon, as models set it
        }
        Operands operands = {x};
        for (int i = 1; i < info.arity; ++i) operands.push_back(value_of(t));
        return commit(builder_.add(op, operands, attrs));
      }
      case TypeRule::Select: {
        NodeId cond = value_of({DType::Bool, t.shape});
        return commit(builder_.add(op, {cond, x, value_of(t)}, attrs));
      }
      case TypeRule::Transpose: {
        attrs[0].ints.resize(t.rank());
        std::iota(attrs[0].ints.begin(), attrs[0].ints.end(), 0);
        std::shuffle(attrs[0].ints.begin(), attrs[0].ints.end(), rng_);
        return commit(builder_.add(op, {x}, attrs));
      }
      case TypeRule::Slice: {
        for (int64_t d : t.shape) {
          int64_t start = pick(0, static_cast<int>(d) - 1),
                  limit = pick(static_cast<int>(start) + 1, static_cast<int>(d));
          attrs[0].ints.push_back(start);
          attrs[1].ints.push_back(limit);
          attrs[2].ints.push_back(pick(1, 2));
        }
        return commit(builder_.add(op, {x}, attrs));
      }
      case TypeRule::Concat: {
        if (t.rank() == 0) return false;
        attrs[0].i = pick(0, static_cast<int>(t.rank()) - 1);
        Operands operands = {x};
        for (int i = pick(1, 2); i > 0; --i) operands.push_back(value_of(t));
        return commit(builder_.add(op, operands, attrs));
      }
      case TypeRule::Reduce: {
        for (int64_t d = 0; d < t.rank(); ++d)
          if (flip()) attrs[0].ints.push_back(d);
        if (attrs[0].ints.empty() && t.rank()) attrs[0].ints.push_back(t.rank() - 1);
        attrs[1].i = flip();
        return commit(builder_.add(op, {x}, attrs));
      }
      case TypeRule::Matmul: {
        if (t.rank() < 2) return false;
        Dims other = t.shape;
        other[other.size() - 2] = t.shape.back();
        other.back() = pick(1, static_cast<int>(options_.max_dim));
        return commit(builder_.add(op, {x, value_of({t.dtype, other})}, attrs));
      }
      case TypeRule::Gather: {
        // Indices from an iota: always in range, so every backend agrees.
        if (t.rank() == 0) return false;
        attrs[0].i = pick(0, static_cast<int>(t.rank()) - 1);
        TensorType indices_type{DType::I64, {pick(1, static_cast<int>(t.shape[attrs[0].i]))}};
        Attrs iota_axis;
        auto indices = builder_.add(OpId::Iota, {}, iota_axis, &indices_type);
        if (!indices) return false;
        return commit(builder_.add(op, {x, *indices}, attrs));
      }
      case TypeRule::Scatter: {
        // Indices from an iota over [k, 2] along its first axis: in range,
        // each picked twice, so repeated indices add up.
        if (t.rank() == 0 || !is_float(t.dtype)) return false;
        attrs[0].i = pick(0, static_cast<int>(t.rank()) - 1);
        int64_t axis = attrs[0].i;
        if (t.shape[axis] < 1) return false;
        TensorType indices_type{DType::I64, {pick(1, static_cast<int>(t.shape[axis])), 2}};
        Attrs iota_axis;
        auto indices = builder_.add(OpId::Iota, {}, iota_axis, &indices_type);
        if (!indices) return false;
        Dims updates(t.shape.begin(), t.shape.begin() + axis);
        updates.insert(updates.end(), indices_type.shape.begin(), indices_type.shape.end());
        updates.insert(updates.end(), t.shape.begin() + axis + 1, t.shape.end());
        return commit(builder_.add(op, {x, *indices, value_of({t.dtype, updates})}, attrs));
      }
      case TypeRule::Pad:
        for (int64_t d = 0; d < t.rank(); ++d) {
          attrs[0].ints.push_back(pick(0, 2));
          attrs[1].ints.push_back(pick(0, 2));
        }
        attrs[2] = constant_value(t.dtype);
        return commit(builder_.add(op, {x}, attrs));
      case TypeRule::Window: return try_window(op, x, t);
    }
    return false;
  }

  // conv2d and the pools over a rank-4 value, with windows that fit it.
  bool try_window(OpId op, NodeId x, const TensorType& t) {
    if (t.rank() != 4 || !is_float(t.dtype)) return false;
    Attrs attrs;
    Ints kernel{pick(1, static_cast<int>(t.shape[2])), pick(1, static_cast<int>(t.shape[3]))};
    Ints strides{pick(1, 2), pick(1, 2)}, pads{pick(0, 1), pick(0, 1), pick(0, 1), pick(0, 1)}, dilations{1, 1};
    if (op == OpId::Conv2d) {
      int64_t groups = t.shape[1] % 2 == 0 && flip() ? 2 : 1;
      TensorType weight{t.dtype, {pick(1, 3) * groups, t.shape[1] / groups, kernel[0], kernel[1]}};
      attrs[0].ints = strides, attrs[1].ints = pads, attrs[2].ints = dilations, attrs[3].i = groups;
      return commit(builder_.add(op, {x, value_of(weight)}, attrs));
    }
    attrs[0].ints = kernel, attrs[1].ints = strides, attrs[2].ints = pads;
    if (op == OpId::MaxPool2d)
      attrs[3].ints = dilations;
    else
      attrs[3].i = flip();
    return commit(builder_.add(op, {x}, attrs));
  }

  // Ops whose result type the node declares: by op, since no rule says it.
  bool try_declared(OpId op, NodeId x) {
    TensorType t = builder_.type(x);  // a copy: adding nodes moves the graph's storage
    Attrs attrs;
    switch (op) {
      case OpId::Constant: values_.push_back(builder_.constant(constant_value(t.dtype), t)); return true;
      case OpId::Parameter: fresh_parameter(random_type(random_dtype())); return true;
      case OpId::Iota: {
        TensorType type = random_type(flip() ? DType::I64 : DType::F32);
        if (type.rank() == 0) return false;
        attrs[0].i = pick(0, static_cast<int>(type.rank()) - 1);
        return commit(builder_.add(op, {}, attrs, &type));
      }
      case OpId::Cast: {
        TensorType type{random_dtype(), t.shape};
        return commit(builder_.add(op, {x}, attrs, &type));
      }
      case OpId::Reshape: {
        TensorType type{t.dtype, {t.num_elements()}};
        if (flip() && t.rank() > 1) type.shape = Dims(t.shape.rbegin(), t.shape.rend());  // same count, other dims
        return commit(builder_.add(op, {x}, attrs, &type));
      }
      case OpId::Broadcast: {
        // Keep x's dims (some stretched from 1) after up to two new leading
        // ones, and at times before new trailing ones (a per-channel value
        // spread over NCHW: groups of rows).
        Dims shape;
        for (int i = pick(0, 2); i > 0; --i) shape.push_back(pick(1, 4));
        for (int64_t d = 0; d < t.rank(); ++d) {
          attrs[0].ints.push_back(static_cast<int64_t>(shape.size()));
          shape.push_back(t.shape[d] == 1 ? pick(1, 4) : t.shape[d]);
        }
        if (pick(0, 3) == 0)
          for (int i = pick(1, 2); i > 0 && static_cast<int64_t>(shape.size()) < options_.max_rank + 2; --i)
            shape.push_back(pick(1, 5));
        TensorType type{t.dtype, shape};
        return commit(builder_.add(op, {x}, attrs, &type));
      }
      default: return false;
    }
  }

  std::mt19937_64 rng_;
  GeneratorOptions options_;
  GraphBuilder builder_;
  std::vector<NodeId> values_;
  int64_t parameters_ = 0;
};

}  // namespace

Graph random_graph(uint64_t seed, const GeneratorOptions& options) { return Generator(seed, options).run(); }

}  // namespace lazylab
