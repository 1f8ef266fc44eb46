#include "core/program_view.h"

namespace lazylab {
namespace {

// Core's kinds are the ABI's values, cast across as they are.
static_assert(static_cast<uint32_t>(KernelKind::Opaque) == LAZYLAB_KERNEL_OPAQUE);
static_assert(static_cast<uint32_t>(KernelKind::Elementwise) == LAZYLAB_KERNEL_ELEMENTWISE);
static_assert(static_cast<uint32_t>(KernelKind::RowReduction) == LAZYLAB_KERNEL_ROW_REDUCTION);
static_assert(static_cast<uint32_t>(KernelKind::Contraction) == LAZYLAB_KERNEL_CONTRACTION);
static_assert(static_cast<uint32_t>(KernelKind::Layout) == LAZYLAB_KERNEL_LAYOUT);
static_assert(static_cast<uint32_t>(KernelKind::Attention) == LAZYLAB_KERNEL_ATTENTION);
static_assert(static_cast<uint32_t>(KernelKind::Window) == LAZYLAB_KERNEL_WINDOW);
static_assert(static_cast<uint32_t>(Access::Full) == LAZYLAB_ACCESS_FULL);
static_assert(static_cast<uint32_t>(Access::PerRow) == LAZYLAB_ACCESS_PER_ROW);
static_assert(static_cast<uint32_t>(Access::Splat) == LAZYLAB_ACCESS_SPLAT);
static_assert(static_cast<uint32_t>(Access::Scalar) == LAZYLAB_ACCESS_SCALAR);
static_assert(static_cast<uint32_t>(Access::Repeat) == LAZYLAB_ACCESS_REPEAT);
static_assert(static_cast<uint32_t>(Access::RowGroup) == LAZYLAB_ACCESS_ROW_GROUP);

template <class Range>
std::vector<uint32_t> to_ids(const Range& range) {
  return std::vector<uint32_t>(range.begin(), range.end());
}

}  // namespace

lazylab_kernel ProgramView::describe(const KernelDescription& description) {
  lazylab_kernel kernel{};
  kernel.struct_size = sizeof(lazylab_kernel);
  kernel.kind = static_cast<uint32_t>(description.kind);
  kernel.rows = description.rows;
  kernel.cols = description.cols;
  auto& accesses = access_arrays_.emplace_back();
  for (const ValueAccess& a : description.accesses)
    accesses.push_back(lazylab_access{a.value, static_cast<uint32_t>(a.kind), a.source, a.period, a.splat});
  kernel.num_accesses = static_cast<uint32_t>(accesses.size());
  kernel.accesses = accesses.data();
  const Contraction& c = description.contraction;
  kernel.contraction =
      lazylab_contraction{c.matmul, c.lhs, c.rhs, c.lhs_transposed, c.rhs_transposed, c.batch, c.m, c.n, c.k};
  const StridedLayout& layout = description.layout;
  auto& shape = int_arrays_.emplace_back(layout.shape);
  auto& strides = int_arrays_.emplace_back(layout.strides);
  kernel.layout = lazylab_layout{static_cast<uint32_t>(shape.size()), shape.data(), strides.data(), layout.offset};
  const Attention& a = description.attention;
  kernel.attention =
      lazylab_attention{a.output, a.q, a.k, a.v, a.k_transposed, a.causal, a.batch, a.m, a.n, a.d, a.dv, a.scale};
  kernel.attention_mask = lazylab_attention_mask{a.mask == kNoNode ? LAZYLAB_NO_MASK : a.mask, a.mask_keeps};
  auto view = [&](const AttentionView& v) {
    return lazylab_attention_view{v.offset, v.row_stride, int_arrays_.emplace_back(v.batch_strides).data()};
  };
  kernel.attention_views =
      lazylab_attention_views{static_cast<uint32_t>(a.batch_shape.size()),
                              int_arrays_.emplace_back(a.batch_shape.begin(), a.batch_shape.end()).data(),
                              view(a.q_view),
                              view(a.k_view),
                              view(a.v_view),
                              view(a.output_view)};
  return kernel;
}

ProgramView::ProgramView(const Program& program, const Graph& graph) {
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const ValueInfo& info = program.values[id];
    auto& shape = int_arrays_.emplace_back(node.type.shape.begin(), node.type.shape.end());
    uint32_t kind = info.kind == ValueKind::Parameter ? LAZYLAB_VALUE_PARAMETER
                    : info.kind == ValueKind::Arena   ? LAZYLAB_VALUE_ARENA
                    : info.kind == ValueKind::Output  ? LAZYLAB_VALUE_OUTPUT
                                                      : LAZYLAB_VALUE_KERNEL_LOCAL;
    values_.push_back(lazylab_value{sizeof(lazylab_value), static_cast<uint32_t>(node.type.dtype),
                                    static_cast<uint32_t>(shape.size()), shape.data(), kind, info.ordinal, info.offset,
                                    node.type.bytes()});
  }
  for (const Kernel& kernel : program.kernels) {
    auto& ops = ops_.emplace_back();
    for (NodeId id : kernel.ops) {
      const Node& node = graph.node(id);
      const OpInfo& info = op_info(node.op);
      auto& operands = id_arrays_.emplace_back(to_ids(node.operands));
      auto& attrs = attr_arrays_.emplace_back();
      for (int a = 0; a < info.num_attrs; ++a) {
        auto& ints = int_arrays_.emplace_back(node.attrs[a].ints.begin(), node.attrs[a].ints.end());
        attrs.push_back(
            lazylab_attr{node.attrs[a].i, node.attrs[a].f, static_cast<uint32_t>(ints.size()), ints.data()});
      }
      ops.push_back(lazylab_op{sizeof(lazylab_op), static_cast<uint32_t>(node.op), id,
                               static_cast<uint32_t>(operands.size()), operands.data(),
                               static_cast<uint32_t>(attrs.size()), attrs.data()});
    }
    auto& inputs = id_arrays_.emplace_back(to_ids(kernel.inputs));
    auto& outputs = id_arrays_.emplace_back(to_ids(kernel.outputs));
    kernels_.push_back(describe(kernel.description));
    lazylab_kernel& view = kernels_.back();
    view.num_ops = static_cast<uint32_t>(ops.size());
    view.ops = ops.data();
    view.num_inputs = static_cast<uint32_t>(inputs.size());
    view.inputs = inputs.data();
    view.num_outputs = static_cast<uint32_t>(outputs.size());
    view.outputs = outputs.data();
  }
  auto& params = id_arrays_.emplace_back(to_ids(program.parameters));
  auto& outputs = id_arrays_.emplace_back(to_ids(program.outputs));
  donors_.assign(program.output_donors.begin(), program.output_donors.end());
  view_ = lazylab_program{sizeof(lazylab_program),
                          static_cast<uint32_t>(values_.size()),
                          values_.data(),
                          static_cast<uint32_t>(kernels_.size()),
                          kernels_.data(),
                          static_cast<uint32_t>(params.size()),
                          params.data(),
                          static_cast<uint32_t>(outputs.size()),
                          outputs.data(),
                          program.arena_bytes,
                          donors_.empty() ? nullptr : donors_.data()};
}

}  // namespace lazylab
