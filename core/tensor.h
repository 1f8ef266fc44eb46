// The lazy tensor API. Every op appends a node to the context's pending
// trace (hashed in O(1)); nothing runs until a sync point: Context::sync(),
// mark_step(), or a host read (Tensor::to_vector). Tensors must not outlive
// their Context, and a Context and its tensors belong to one thread at a
// time (their handle counts are not atomic).
//
// Errors are values here too: an op on bad operands (shape mismatch, wrong
// dtype) returns a tensor that carries the error; ops on it propagate it, and
// reading it returns it.
//
// Data lives in the backend's buffers: a computed tensor stays on the
// backend's device across steps, and feeding it to the next step moves no
// bytes. Host data (from_vector, from_buffer) enters the backend once, at the
// tensor's first use there; a host read copies that one tensor (or, on a
// host-memory backend, views it).
#pragma once

#include <array>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "buffer.h"
#include "engine.h"
#include "graph.h"

namespace lazylab {

class Context;

// What a Tensor handle points to; bookkeeping for Context, not for users.
// Its handle count is a plain integer, not an atomic one: a Context and its
// tensors belong to one thread at a time, and an atomic count changed on
// every traced op was a measurable part of tracing cost.
struct TensorImpl {
  // User-provided, so allocation runs the initialisers below instead of
  // zero-filling the object first: a measurable part of tracing cost.
  TensorImpl() {}
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl();

  uint32_t handles = 0;
  Context* context = nullptr;
  // While the tensor is pending its type is its node's, and is only copied
  // here when it leaves the trace: a copy per traced op was measurable.
  TensorType type;
  NodeId node = kNoNode;  // pending node in the current trace
  size_t pending_index = 0;
  BufferPtr data;          // the value on the host, when it has been there
  DeviceBufferPtr device;  // the value in the engine's backend, when it has been there
  std::shared_ptr<const Error> error;
  // The parameter node standing for `data` in the current trace, so x+x
  // uses one parameter and x+y two.
  NodeId parameter_node = kNoNode;
  uint64_t parameter_epoch = 0;
};

// Frees `impl`, or gives it back to its Context for the next op's result
// when it was pending (see Context::recycle).
void release(TensorImpl* impl) noexcept;
inline void intrusive_ptr_add_ref(TensorImpl* impl) noexcept { ++impl->handles; }
inline void intrusive_ptr_release(TensorImpl* impl) noexcept {
  if (--impl->handles == 0) release(impl);
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(boost::intrusive_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool ok() const { return impl_ && !impl_->error; }  // inline: every traced op asks
  const Error* error() const;                         // null when ok
  const TensorType& type() const;
  const Dims& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int64_t rank() const { return type().rank(); }
  Context& context() const { return *impl_->context; }
  bool pending() const;  // recorded in the trace, not yet computed

  // Host reads: sync first if pending; the first read of a computed tensor
  // brings its data to the host (waiting for the device), later reads reuse it.
  Expected<BufferPtr> data() const;
  template <class T>
  Expected<std::vector<T>> to_vector() const;

  TensorImpl* impl() const { return impl_.get(); }

 private:
  boost::intrusive_ptr<TensorImpl> impl_;
};

class Context {
 public:
  explicit Context(Engine& engine);
  // A capture-only context: it traces, and capture() hands back the graph;
  // sync() reports that there is no engine to run it.
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Host data; it enters a trace as a parameter, hashed by type and
  // ordinal, never by value. The backend may use `data` in place: it must not
  // change while the tensor (or one computed from it) is in use.
  Tensor from_buffer(TensorType type, BufferPtr data);
  // Another library's device memory (a CUDA tensor, through DLPack), copied
  // on the device into the engine's backend: after the work queued on the
  // producer's `stream`, before what it queues next. An error where the
  // backend keeps its data in host memory or the memory lies on another
  // device than the engine's.
  Tensor from_device_memory(TensorType type, const void* data, int32_t dlpack_device_type, int32_t device,
                            uint64_t stream);
  // An input with no data: it traces as from_buffer's does (capture() sees a
  // parameter), so a step can be traced to learn its graph before anything
  // is allocated; running it is an error.
  Tensor placeholder(TensorType type);
  template <class T>
  Tensor from_vector(const std::vector<T>& values, Dims shape);
  // A splat constant, hashed by value; an integer type stores it truncated
  // toward zero (a double holds integers exactly up to 2^53).
  Tensor full(double value, TensorType type);
  // An integer splat, exact for every value of type's dtype (an i32 keeps
  // the low 32 bits).
  Tensor full_integer(int64_t value, TensorType type);
  Tensor scalar(double value, DType dtype = DType::F32) { return full(value, TensorType{dtype, {}}); }
  // A scalar that changes between steps: it becomes a parameter so the
  // cache keeps hitting.
  Tensor dynamic_scalar(double value, DType dtype = DType::F32);
  Tensor iota(TensorType type, int64_t axis);

  // Computes every live pending tensor.
  Status sync();
  Status mark_step() { return sync(); }
  // Returns once the backend has finished the work sync() submitted (a
  // device backend's sync may return before), and records its device time.
  Status wait();
  // Drops the pending trace without running it; pending tensors read as an
  // error afterwards.
  void discard_pending();

  // The graph sync() would compile now (the live pending tensors as roots),
  // without running it; the trace is left as it is.
  Graph capture();
  // capture(), and the input bound to each of its parameters, by ordinal:
  // what replaying the step elsewhere needs (a `.lzir` and its weights).
  Graph capture(std::vector<Tensor>& inputs);
  // The graph computing `roots` (each pending on this context), in their
  // order, and the input bound to each of its parameters; the trace is left
  // as it is.
  Expected<Graph> capture(std::span<const Tensor> roots, std::vector<Tensor>& inputs);
  // `graph` as a function: its ops recorded on this trace with parameter N
  // bound to inputs[N] (of the parameter's type); its roots' tensors, pending.
  // The trace hashes as if the ops had been recorded one by one, so a graph
  // called each step hits the computation cache.
  Expected<std::vector<Tensor>> call(const Graph& graph, std::span<const Tensor> inputs);

  Metrics& metrics() { return *metrics_; }
  size_t pending_nodes() const { return trace_.size(); }
  // The most nodes a trace may hold between syncs (the engine's
  // EngineOptions::max_trace_nodes; a capture-only context's
  // kDefaultMaxTraceNodes): an op past it is an error naming the count, so a
  // loop that never syncs stops instead of filling memory.
  void set_max_trace_nodes(uint64_t nodes) { max_trace_nodes_ = nodes; }
  uint64_t max_trace_nodes() const { return max_trace_nodes_; }

  // Appends `op` to the trace; used by the ops in tensor_ops.h. A spare is
  // a handle the caller gives up (an operand taken by value): the first
  // whose tensor is pending and has no other handle becomes the result's.
  Tensor record(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs = no_attrs(),
                const TensorType* declared = nullptr, std::span<Tensor* const> spares = {});
  Tensor record(OpId op, std::span<const Tensor> operands, const Attrs& attrs = no_attrs(),
                const TensorType* declared = nullptr);
  // `op` of x and a splat of `value` in x's type (first when scalar_first).
  Tensor record_with_scalar(OpId op, const Tensor& x, double value, bool scalar_first,
                            std::span<Tensor* const> spares = {});
  Tensor error_tensor(Error error);

  // Bookkeeping for TensorImpl; not for users.
  void forget(TensorImpl* impl);
  // Takes back a pending tensor's last handle's object for a later op's
  // result; false when it is not kept (the caller frees it).
  bool recycle(TensorImpl* impl);
  Expected<BufferPtr> read_to_host(TensorImpl& impl);

 private:
  struct Roots;
  friend class Tensor;  // a pending tensor's type is its node's
  Expected<NodeId> node_for(const Tensor& operand);
  void leave_trace(TensorImpl& impl);
  Tensor make_pending(NodeId node, std::span<Tensor* const> spares = {});
  NodeId replay(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs, const TensorType* declared);
  Tensor record_afresh(OpId op, std::span<const Tensor* const> operands, const Attrs& attrs, const TensorType* declared,
                       std::span<Tensor* const> spares);
  Tensor record_with_scalar_afresh(OpId op, const Tensor& x, double value, bool scalar_first,
                                   std::span<Tensor* const> spares);
  NodeId replay_with_scalar(OpId op, const Tensor& x, double value, bool scalar_first);
  Expected<NodeId> append(OpId op, std::span<const TensorType* const> types, Operands&& operands, const Attrs& attrs,
                          const TensorType* declared);
  Expected<NodeId> constant_node(double value, const TensorType& type);
  Roots collect_roots();
  Status run_roots(const Roots& roots);
  void reset_trace();

  Engine* engine_ = nullptr;
  Metrics own_metrics_;
  Metrics* metrics_;
  Graph trace_;
  uint64_t max_trace_nodes_;
  uint64_t epoch_ = 1;
  std::vector<TensorImpl*> pending_;
  // This trace's splat constants, so `x * 0.99` in a loop adds one node.
  std::array<NodeId, 64> recent_constants_{};
  std::vector<Tensor> parameters_;  // by trace ordinal
  // Objects of dropped pending tensors, for the next results (recycle()).
  std::vector<TensorImpl*> spare_impls_;
};

template <class T>
Tensor Context::from_vector(const std::vector<T>& values, Dims shape) {
  TensorType type{dtype_of<T>(), std::move(shape)};
  if (std::string problem = size_problem(type); !problem.empty())
    return error_tensor(make_error("from_vector: " + problem));
  if (static_cast<int64_t>(values.size()) != type.num_elements())
    return error_tensor(
        make_error("from_vector: " + std::to_string(values.size()) + " values for shape " + to_string(type)));
  auto buffer = std::make_shared<Buffer>(type.bytes());
  std::copy(values.begin(), values.end(), reinterpret_cast<T*>(buffer->data()));
  return from_buffer(std::move(type), std::move(buffer));
}

template <class T>
Expected<std::vector<T>> Tensor::to_vector() const {
  if (!ok()) return *error();
  if (dtype() != dtype_of<T>())
    return make_error("to_vector: tensor is " + to_string(type()) + ", asked for another dtype");
  auto buffer = data();
  if (!buffer) return buffer.error();
  const T* begin = reinterpret_cast<const T*>((*buffer)->data());
  return std::vector<T>(begin, begin + type().num_elements());
}

}  // namespace lazylab
