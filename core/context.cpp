#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "core/hash.h"
#include "core/tensor.h"

namespace lazylab {

TensorImpl::~TensorImpl() {
  if (node != kNoNode) context->forget(this);
}

// ---- Tensor ----

const Error* Tensor::error() const {
  static const Error kEmpty{"use of an empty Tensor"};
  if (!impl_) return &kEmpty;
  return impl_->error.get();
}

namespace {
const TensorType kNoType;
}  // namespace

const TensorType& Tensor::type() const {
  if (!impl_) return kNoType;
  return impl_->node != kNoNode ? impl_->context->trace_.node(impl_->node).type : impl_->type;
}

bool Tensor::pending() const { return impl_ && impl_->node != kNoNode; }

Expected<BufferPtr> Tensor::data() const {
  if (!ok()) return *error();
  if (pending()) {
    Status status = impl_->context->sync();
    if (!status) return status.error();
  }
  if (!impl_->data) return impl_->context->read_to_host(*impl_);
  return impl_->data;
}

// ---- Context ----

namespace {

Error trace_limit_error(uint64_t limit) {
  return make_error(fmt::format(
      "the trace reached {} nodes without a sync, its limit (limits.trace-nodes in an experiment, "
      "EngineOptions::max_trace_nodes, Context::set_max_trace_nodes): sync (mark_step) more often, or raise it",
      limit));
}
// Enough for every handle a statement drops (a few), and a bound on what a
// Context keeps.
constexpr size_t kMaxSpareImpls = 64;
}  // namespace

Context::Context(Engine& engine)
    : engine_(&engine), metrics_(&engine.metrics()), max_trace_nodes_(engine.options().max_trace_nodes) {
  trace_.reserve(1024);
}

Context::Context() : metrics_(&own_metrics_), max_trace_nodes_(kDefaultMaxTraceNodes) { trace_.reserve(1024); }

Context::~Context() {
  for (TensorImpl* impl : pending_) leave_trace(*impl);
  for (TensorImpl* impl : spare_impls_) delete impl;
}

void release(TensorImpl* impl) noexcept {
  if (impl->node != kNoNode && impl->context->recycle(impl)) return;
  delete impl;
}

// `x = x + 1` drops x's pending tensor as it makes the next one, so a trace
// of such statements would allocate and free an object per op: a measurable
// part of tracing cost. A pending tensor's object holds nothing but its node
// (its type, data and error are only set when it leaves the trace), so it
// can serve the next result as it is.
bool Context::recycle(TensorImpl* impl) {
  forget(impl);
  if (spare_impls_.size() >= kMaxSpareImpls) return false;
  spare_impls_.push_back(impl);
  return true;
}

void Context::leave_trace(TensorImpl& impl) {
  impl.type = trace_.node(impl.node).type;
  impl.node = kNoNode;
}

void Context::forget(TensorImpl* impl) {
  TensorImpl* last = pending_.back();
  pending_[impl->pending_index] = last;
  last->pending_index = impl->pending_index;
  pending_.pop_back();
  impl->node = kNoNode;
}

Expected<BufferPtr> Context::read_to_host(TensorImpl& impl) {
  if (!engine_ || !impl.device)
    return make_error(impl.data || impl.device ? "read: the tensor has no data"
                                               : fmt::format("an input made by Context::placeholder ({}) has no data "
                                                             "to run with",
                                                             to_string(impl.type)));
  auto host = engine_->backend().download(impl.device);
  if (!host) return host.error();
  ++metrics().device_to_host_transfers;
  metrics().device_to_host_bytes += impl.type.bytes();
  impl.data = *host;
  return impl.data;
}

Status Context::wait() {
  if (!engine_) return {};
  return engine_->wait();
}

Tensor Context::error_tensor(Error error) {
  boost::intrusive_ptr<TensorImpl> impl(new TensorImpl);
  impl->context = this;
  impl->error = std::make_shared<const Error>(std::move(error));
  return Tensor(std::move(impl));
}

[[gnu::always_inline]] inline Tensor Context::make_pending(NodeId node, std::span<Tensor* const> spares) {
  for (Tensor* spare : spares) {
    TensorImpl* given = spare->impl();
    if (given && given->handles == 1 && given->node != kNoNode && given->context == this) {
      given->node = node;  // its old node stays in the trace, an operand
      return std::move(*spare);
    }
  }
  TensorImpl* fresh;
  if (!spare_impls_.empty()) {
    fresh = spare_impls_.back();
    spare_impls_.pop_back();
  } else {
    fresh = new TensorImpl;
    fresh->context = this;
  }
  boost::intrusive_ptr<TensorImpl> impl(fresh);
  impl->node = node;
  impl->pending_index = pending_.size();
  pending_.push_back(impl.get());
  return Tensor(std::move(impl));
}

Tensor Context::placeholder(TensorType type) {
  if (std::string problem = size_problem(type); !problem.empty())
    return error_tensor(make_error("placeholder: " + problem));
  boost::intrusive_ptr<TensorImpl> impl(new TensorImpl);
  impl->context = this;
  impl->type = std::move(type);
  return Tensor(std::move(impl));
}

Tensor Context::from_buffer(TensorType type, BufferPtr data) {
  if (std::string problem = size_problem(type); !problem.empty())
    return error_tensor(make_error("from_buffer: " + problem));
  if (!data || data->bytes() != type.bytes())
    return error_tensor(make_error(fmt::format("from_buffer: buffer does not hold {}", to_string(type))));
  boost::intrusive_ptr<TensorImpl> impl(new TensorImpl);
  impl->context = this;
  impl->type = std::move(type);
  impl->data = std::move(data);
  return Tensor(std::move(impl));
}

Tensor Context::from_device_memory(TensorType type, const void* data, int32_t dlpack_device_type, int32_t device,
                                   uint64_t stream) {
  if (std::string problem = size_problem(type); !problem.empty())
    return error_tensor(make_error("from_device_memory: " + problem));
  if (!engine_) return error_tensor(make_error("from_device_memory: this context has no engine to copy into"));
  if (device != engine_->options().device)
    return error_tensor(
        make_error(fmt::format("from_device_memory: the memory lies on device {}, this context's "
                               "engine runs on device {}",
                               device, engine_->options().device)));
  auto buffer = engine_->backend().copy_device_memory(type, {data, dlpack_device_type, device, stream});
  if (!buffer) return error_tensor(buffer.error());
  boost::intrusive_ptr<TensorImpl> impl(new TensorImpl);
  impl->context = this;
  impl->type = std::move(type);
  impl->device = std::move(*buffer);
  return Tensor(std::move(impl));
}

namespace {

// A slot of the recent-constants cache: two constants that share one only
// cost a duplicate node, so a multiplicative hash of a few words will do.
size_t constant_slot(double value, const TensorType& type, size_t slots) {  // slots: a power of 2
  uint64_t word = std::bit_cast<uint64_t>(value) ^ static_cast<uint64_t>(type.dtype) << 3 ^ type.shape.size() << 7;
  if (!type.shape.empty()) word ^= static_cast<uint64_t>(type.shape.back()) << 11;
  // The product's top bits depend on every bit of the word (a value's
  // differ from another's mostly in the exponent, the top bits).
  return static_cast<size_t>((word * 0x9E3779B97F4A7C15ULL) >> (64 - std::countr_zero(slots)));
}

// A float constant's value is the double as given; an integer's is the
// integer it stores (scalar_attr), compared exactly: two integers past 2^53
// can share a double. (The double first: this is a repeated trace's path.)
[[gnu::noinline]] bool holds_integer_of(const Node& node, double value) {
  return node.attrs[0].i == scalar_attr(node.type.dtype, value).i;
}

[[gnu::always_inline]] inline bool is_constant(const Node& node, double value, const TensorType& type) {
  if (node.op != OpId::Constant || std::bit_cast<uint64_t>(node.attrs[0].f) != std::bit_cast<uint64_t>(value) ||
      node.type != type)
    return false;
  return is_float(type.dtype) || holds_integer_of(node, value);
}

}  // namespace

// A splat constant appears once per trace however often it is written
// (`x * 0.99` in a loop): each copy would be a node to type, hash, cut and
// lower on every step, and CSE would merge them anyway.
Expected<NodeId> Context::constant_node(double value, const TensorType& type) {
  // An entry is checked against the trace, so one left from an earlier
  // trace (or from another constant in the slot) is only a miss.
  NodeId& recent = recent_constants_[constant_slot(value, type, recent_constants_.size())];
  if (recent < trace_.size() && is_constant(trace_.node(recent), value, type)) return recent;
  Attrs attrs;
  attrs[0] = scalar_attr(type.dtype, value);
  auto node = append(OpId::Constant, {}, {}, attrs, &type);
  if (node) recent = *node;
  return node;
}

Tensor Context::full(double value, TensorType type) {
  auto node = constant_node(value, type);
  if (!node) return error_tensor(node.error());
  return make_pending(*node);
}

Tensor Context::full_integer(int64_t value, TensorType type) {
  Attrs attrs;
  attrs[0] = integer_scalar_attr(type.dtype, value);
  auto node = append(OpId::Constant, {}, {}, attrs, &type);
  if (!node) return error_tensor(node.error());
  return make_pending(*node);
}

// The op the last trace recorded at this position, when this one repeats it
// (`x * 0.99` in a training loop): its constant is already in this trace,
// the operand of the kept node, so no constant is looked up or checked
// twice, and no error value is built. kNoNode otherwise: the caller records
// it the long way.
NodeId Context::replay_with_scalar(OpId op, const Tensor& x, double value, bool scalar_first) {
  const TensorImpl* impl = x.impl();
  const Node* kept = trace_.next_kept();
  if (!kept || !impl || impl->context != this || impl->node == kNoNode || kept->op != op || kept->operands.size() != 2)
    return kNoNode;
  NodeId constant = kept->operands[scalar_first ? 0 : 1];
  if (kept->operands[scalar_first ? 1 : 0] != impl->node || op_info(op).num_attrs != 0) return kNoNode;
  if (!is_constant(trace_.node(constant), value, trace_.node(impl->node).type)) return kNoNode;
  ++metrics().nodes_traced;
  return trace_.take_next();  // the same op of the same operands, and no attributes to compare
}

Tensor Context::record_with_scalar(OpId op, const Tensor& x, double value, bool scalar_first,
                                   std::span<Tensor* const> spares) {
  if (NodeId node = replay_with_scalar(op, x, value, scalar_first); node != kNoNode) return make_pending(node, spares);
  return record_with_scalar_afresh(op, x, value, scalar_first, spares);
}

// Apart from the replay above, whose frame then sets up none of this one's
// values (that was a measurable part of a repeated trace's cost).
[[gnu::noinline]] Tensor Context::record_with_scalar_afresh(OpId op, const Tensor& x, double value, bool scalar_first,
                                                            std::span<Tensor* const> spares) {
  auto x_node = node_for(x);
  if (!x_node) return error_tensor(x_node.error());
  auto constant = constant_node(value, x.type());
  if (!constant) return error_tensor(constant.error());
  const TensorType* types[] = {&x.type(), &x.type()};
  Operands ids = scalar_first ? Operands{*constant, *x_node} : Operands{*x_node, *constant};
  auto node = append(op, types, std::move(ids), no_attrs(), nullptr);
  if (!node) return error_tensor(node.error());
  return make_pending(*node, spares);
}

Tensor Context::dynamic_scalar(double value, DType dtype) {
  TensorType type{dtype, {}};
  auto buffer = std::make_shared<Buffer>(type.bytes());
  AttrValue scalar = scalar_attr(dtype, value);  // as a constant of the dtype holds it
  visit_dtype(dtype, [&]<class T>(T) {
    *reinterpret_cast<T*>(buffer->data()) = is_float(dtype) ? static_cast<T>(scalar.f) : static_cast<T>(scalar.i);
  });
  return from_buffer(type, std::move(buffer));
}

Tensor Context::iota(TensorType type, int64_t axis) {
  Attrs attrs;
  attrs[0].i = axis;
  return record(OpId::Iota, std::span<const Tensor* const>(), attrs, &type);
}

Expected<NodeId> Context::node_for(const Tensor& operand) {
  if (!operand.ok()) return *operand.error();
  TensorImpl* impl = operand.impl();
  if (impl->context != this) return make_error("operand belongs to another Context");
  if (impl->node != kNoNode) return impl->node;
  if (impl->parameter_epoch != epoch_) {
    if (trace_.size() >= max_trace_nodes_) return trace_limit_error(max_trace_nodes_);
    Attrs attrs;
    attrs[0].i = static_cast<int64_t>(parameters_.size());
    NodeId kept = trace_.reuse(OpId::Parameter, {}, attrs, &impl->type);
    impl->parameter_node = kept != kNoNode ? kept : trace_.add(OpId::Parameter, impl->type, {}, attrs);
    impl->parameter_epoch = epoch_;
    parameters_.push_back(operand);
  }
  return impl->parameter_node;
}

// The node the last trace recorded at this position, when every operand is
// pending here and this op repeats it; kNoNode otherwise. No operand's id
// goes through an error value, and no operand list is built.
NodeId Context::replay(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs,
                       const TensorType* declared) {
  std::array<NodeId, 3> ids;
  if (operands.size() > ids.size() || !trace_.next_kept()) return kNoNode;
  if (!declared && op_info(op).type_rule == TypeRule::Declared) return kNoNode;  // append() reports it
  for (size_t i = 0; i < operands.size(); ++i) {
    const TensorImpl* impl = operands[i]->impl();
    if (!impl || impl->context != this || impl->node == kNoNode) return kNoNode;
    ids[i] = impl->node;
  }
  NodeId node = trace_.reuse(op, std::span(ids.data(), operands.size()), attrs, declared);
  if (node != kNoNode) ++metrics().nodes_traced;
  return node;
}

Tensor Context::record(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs, const TensorType* declared,
                       std::span<Tensor* const> spares) {
  if (NodeId node = replay(op, operands, attrs, declared); node != kNoNode) return make_pending(node, spares);
  return record_afresh(op, operands, attrs, declared, spares);
}

// Apart from the replay above, like record_with_scalar_afresh.
[[gnu::noinline]] Tensor Context::record_afresh(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs,
                                                const TensorType* declared, std::span<Tensor* const> spares) {
  Operands ids;
  for (const Tensor* operand : operands) {
    auto id = node_for(*operand);
    if (!id) return error_tensor(id.error());
    ids.push_back(*id);
  }
  // Only now: a pending operand's type lies in the trace, which node_for
  // may have grown (and moved) for a later operand's parameter.
  boost::container::small_vector<const TensorType*, 3> types;
  for (const Tensor* operand : operands) types.push_back(&operand->type());
  auto node = append(op, std::span(types.data(), types.size()), std::move(ids), attrs, declared);
  if (!node) return error_tensor(node.error());
  return make_pending(*node, spares);
}

Expected<NodeId> Context::append(OpId op, std::span<const TensorType* const> types, Operands&& operands,
                                 const Attrs& attrs, const TensorType* declared) {
  // A node the last trace had at this position has been typed and hashed.
  if (declared || op_info(op).type_rule != TypeRule::Declared) {
    NodeId kept = trace_.reuse(op, std::span(operands.data(), operands.size()), attrs, declared);
    if (kept != kNoNode) {
      ++metrics().nodes_traced;
      return kept;
    }
  }
  if (trace_.size() >= max_trace_nodes_) return trace_limit_error(max_trace_nodes_);
  auto type = infer_type(op, types, attrs, declared);
  if (!type) return type.error();
  ++metrics().nodes_traced;
  return trace_.emplace(op, std::move(*type), std::move(operands), Attrs(attrs));
}

Tensor Context::record(OpId op, std::span<const Tensor> operands, const Attrs& attrs, const TensorType* declared) {
  boost::container::small_vector<const Tensor*, 3> pointers;
  for (const Tensor& operand : operands) pointers.push_back(&operand);
  return record(op, std::span(pointers.data(), pointers.size()), attrs, declared);
}

struct Context::Roots {
  std::vector<NodeId> nodes;  // unique, ascending
  uint64_t hash = 0;
};

Context::Roots Context::collect_roots() {
  Roots roots;
  for (TensorImpl* impl : pending_) roots.nodes.push_back(impl->node);
  std::sort(roots.nodes.begin(), roots.nodes.end());
  roots.nodes.erase(std::unique(roots.nodes.begin(), roots.nodes.end()), roots.nodes.end());
  boost::container::small_vector<uint64_t, 8> hashes;
  for (NodeId node : roots.nodes) hashes.push_back(trace_.node(node).hash);
  roots.hash = hash_roots(std::span(hashes.data(), hashes.size()));
  return roots;
}

namespace {

// The part of `trace` that `roots` need, renumbered, with parameters numbered
// densely; `source_ordinals` receives each new parameter's trace ordinal.
Graph cut_trace(const Graph& trace, const std::vector<NodeId>& roots, std::vector<int64_t>& source_ordinals) {
  std::vector<bool> live = live_nodes(trace, roots);
  std::vector<NodeId> renumbered(trace.size());
  Graph graph;
  for (NodeId id = 0; id < trace.size(); ++id) {
    if (!live[id]) continue;
    const Node& node = trace.node(id);
    Operands operands;
    for (NodeId operand : node.operands) operands.push_back(renumbered[operand]);
    Attrs attrs = node.attrs;
    if (node.op == OpId::Parameter) {
      source_ordinals.push_back(node.attrs[0].i);
      attrs[0].i = static_cast<int64_t>(source_ordinals.size() - 1);
    }
    renumbered[id] = graph.add(node.op, node.type, std::move(operands), std::move(attrs));
  }
  for (NodeId root : roots) graph.add_root(renumbered[root]);
  return graph;
}

}  // namespace

Graph Context::capture() {
  Roots roots = collect_roots();
  std::vector<int64_t> source_ordinals;
  return cut_trace(trace_, roots.nodes, source_ordinals);
}

Graph Context::capture(std::vector<Tensor>& inputs) {
  Roots roots = collect_roots();
  std::vector<int64_t> source_ordinals;
  Graph graph = cut_trace(trace_, roots.nodes, source_ordinals);
  inputs.clear();
  for (int64_t ordinal : source_ordinals) inputs.push_back(parameters_[ordinal]);
  return graph;
}

Expected<Graph> Context::capture(std::span<const Tensor> roots, std::vector<Tensor>& inputs) {
  std::vector<NodeId> nodes;
  for (size_t i = 0; i < roots.size(); ++i) {
    const TensorImpl* impl = roots[i].impl();
    if (!impl || impl->context != this || impl->node == kNoNode)
      return make_error(fmt::format("capture: root {} is not pending on this context (computed, or another's)", i));
    nodes.push_back(impl->node);
  }
  std::vector<int64_t> source_ordinals;
  Graph graph = cut_trace(trace_, nodes, source_ordinals);
  inputs.clear();
  for (int64_t ordinal : source_ordinals) inputs.push_back(parameters_[ordinal]);
  return graph;
}

Expected<std::vector<Tensor>> Context::call(const Graph& graph, std::span<const Tensor> inputs) {
  size_t expected = graph.parameters().size();
  if (inputs.size() != expected)
    return make_error(fmt::format("call: the graph takes {} inputs, {} given", expected, inputs.size()));
  std::vector<Tensor> values(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == OpId::Parameter) {
      auto ordinal = static_cast<size_t>(node.attrs[0].i);
      if (ordinal >= inputs.size())
        return make_error(
            fmt::format("call: the graph's parameter {} has no input ({} given)", ordinal, inputs.size()));
      if (!(inputs[ordinal].type() == node.type))
        return make_error(fmt::format("call: input {} is {}, the graph's parameter {} is {}", ordinal,
                                      to_string(inputs[ordinal].type()), ordinal, to_string(node.type)));
      values[id] = inputs[ordinal];
      continue;
    }
    boost::container::small_vector<const Tensor*, 3> operands;
    for (NodeId operand : node.operands) operands.push_back(&values[operand]);
    values[id] = record(node.op, std::span(operands.data(), operands.size()), node.attrs, &node.type);
  }
  std::vector<Tensor> outputs;
  for (NodeId root : graph.roots()) outputs.push_back(values[root]);
  return outputs;
}

namespace {

// Whether an input's buffer is dead once this step has read it: the trace
// holds the tensor's last handle (its user rebound or dropped it, as a
// training step does its old weights) and nothing else holds the buffer (a
// host view of it, another tensor, a DLPack export).
bool given_up(const TensorImpl& input) { return input.handles == 1 && input.device.use_count() == 1; }

}  // namespace

Status Context::run_roots(const Roots& roots) {
  if (!engine_) return make_error("sync: this Context only captures traces (it has no engine)");
  Engine& engine = *engine_;
  uint64_t key = engine.cache_key(roots.hash);
  std::shared_ptr<CompiledGraph> compiled = engine.lookup(key);
  if (!compiled || engine.options().verify_cache_hits) {
    std::vector<int64_t> source_ordinals;
    Graph graph = cut_trace(trace_, roots.nodes, source_ordinals);
    if (!compiled || !structurally_equal(*compiled->source, graph)) {
      auto fresh = engine.compile(key, graph, std::move(source_ordinals));
      if (!fresh) return fresh.error();
      compiled = std::move(*fresh);
    }
  }
  boost::container::small_vector<const DeviceBuffer*, 8> parameters;
  boost::container::small_vector<uint8_t, 8> donated;
  for (int64_t ordinal : compiled->source_ordinals) {
    TensorImpl& input = *parameters_[ordinal].impl();
    if (!input.device && !input.data)
      return make_error(
          fmt::format("an input made by Context::placeholder ({}) has no data to run with", to_string(input.type)));
    if (!input.device) {  // host data entering the backend: once per tensor
      auto uploaded = engine.backend().upload(input.type, input.data, engine.options().device);
      if (!uploaded) return uploaded.error();
      input.device = std::move(*uploaded);
      ++metrics().host_to_device_transfers;
      metrics().host_to_device_bytes += input.type.bytes();
    }
    parameters.push_back(input.device.get());
    donated.push_back(given_up(input));
  }
  auto outputs = engine.execute(*compiled, std::span(parameters.data(), parameters.size()),
                                std::span(donated.data(), donated.size()));
  if (!outputs) return outputs.error();
  for (TensorImpl* impl : pending_) {
    auto root = std::lower_bound(roots.nodes.begin(), roots.nodes.end(), impl->node);
    impl->device = (*outputs)[root - roots.nodes.begin()];
    leave_trace(*impl);
  }
  pending_.clear();
  return {};
}

void Context::discard_pending() {
  if (!pending_.empty()) {
    auto discarded = std::make_shared<const Error>(Error{"the pending trace was discarded"});
    for (TensorImpl* impl : pending_) impl->error = discarded;
  }
  reset_trace();
}

void Context::reset_trace() {
  for (TensorImpl* impl : pending_) leave_trace(*impl);
  pending_.clear();
  trace_.clear();
  parameters_.clear();
  ++epoch_;
}

Status Context::sync() {
  if (pending_.empty()) {
    reset_trace();
    return {};
  }
  ++metrics().traces;
  Status status = run_roots(collect_roots());
  // On failure the pending tensors are dropped (they read as an error), so
  // the next step starts from a clean trace either way.
  if (!status)
    for (TensorImpl* impl : pending_) impl->error = std::make_shared<const Error>(status.error());
  reset_trace();
  return status;
}

}  // namespace lazylab
