// cpu: the optimising CPU backend. Contractions and convolutions
// (conv_plan.h) go to OpenBLAS, layout ops are strided copies
// (layout_plan.h), concats and gathers block copies (concat_plan.h,
// gather_plan.h), sums over leading axes column sums
// (axis_reduction_plan.h), fused elementwise and reduction kernels run as
// row-space loops in cache-sized segments with TBB (row_plan.h), and what
// none covers runs on the reference kernels. One arena per executable, laid
// out by the memory plan.
//
// Options: CpuBackend::kOptions (`lazylab backends` lists them). OpenBLAS
// and TBB both use `threads`, and GEMMs run outside TBB's parallel loops so
// they never compete; `strict` lets tests pin that the fast plans cover what
// the fusion strategies make.
#include <tbb/task_arena.h>

#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "attention_plan.h"
#include "axis_reduction_plan.h"
#include "concat_plan.h"
#include "conv_plan.h"
#include "gather_plan.h"
#include "gemm_plan.h"
#include "host_ceilings.h"
#include "layout_plan.h"
#include "lazylab/backend_plugin.hpp"
#include "lazylab/op_table.hpp"
#include "pool_plan.h"
#include "reference_plan.h"
#include "row_plan.h"
#include "scatter_plan.h"

namespace lazylab::cpu {

std::vector<ValueInfo> copy_values(const lazylab_program& program) {
  std::vector<ValueInfo> values;
  for (uint32_t v = 0; v < program.num_values; ++v) {
    const lazylab_value& value = program.values[v];
    values.push_back(
        {value.dtype, {value.shape, value.shape + value.rank}, value.kind, value.ordinal, value.offset, value.bytes});
  }
  return values;
}

namespace {

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{64}); }
};

// A matmul or conv2d fused with an epilogue produces a kernel-local value,
// but sgemm needs memory for it: such products get their own arena space
// after the memory plan's (not an attention kernel's scores: its plan keeps
// a block of them at a time). Returns the arena size.
uint64_t place_products(const lazylab_program& program, std::vector<ValueInfo>& values) {
  uint64_t end = program.arena_bytes;
  for (uint32_t k = 0; k < program.num_kernels; ++k)
    for (uint32_t i = 0; i < program.kernels[k].num_ops; ++i) {
      if (program.kernels[k].kind == LAZYLAB_KERNEL_ATTENTION) break;
      const lazylab_op& op = program.kernels[k].ops[i];
      ValueInfo& value = values[op.result];
      bool product = op.op == LAZYLAB_OP_Matmul || op.op == LAZYLAB_OP_Conv2d;
      if (!product || value.kind != LAZYLAB_VALUE_KERNEL_LOCAL) continue;
      value.kind = LAZYLAB_VALUE_ARENA;
      value.offset = end;
      end += (value.bytes + 63) / 64 * 64;
    }
  return end;
}

// The plan of the first builder that makes one for `kernel`; else the
// reference kernels, and why: the reasons of the builders that declined it.
struct KernelChoice {
  std::unique_ptr<KernelPlan> plan;
  std::string on_reference_kernels;  // empty: all of it runs on a fast plan
};

KernelChoice choose_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                         const RowPlanOptions& options, const openblas::Runtime& blas) {
  const std::pair<const char*, std::function<Planned<KernelPlan>()>> builders[] = {
      {"attention", [&] { return make_attention_plan(kernel, values, options, blas); }},
      {"gemm", [&] { return make_gemm_plan(kernel, values, options, blas); }},
      {"convolution", [&] { return make_conv_plan(kernel, values, options, blas); }},
      {"pool", [&] { return make_pool_plan(kernel, values, options.arena); }},
      {"layout copy", [&] { return make_layout_plan(kernel, values, options.arena); }},
      {"axis sum", [&] { return make_axis_reduction_plan(kernel, values, options.arena); }},
      {"concat", [&] { return make_concat_plan(kernel, values, options.arena); }},
      {"gather", [&] { return make_gather_plan(kernel, values, options.arena); }},
      {"scatter-add", [&] { return make_scatter_plan(kernel, values, options.arena); }},
      {"row loops", [&] { return Planned<KernelPlan>(make_row_plan(kernel, values, options)); }},
  };
  std::string declined;
  for (const auto& [builder, build] : builders) {
    Planned<KernelPlan> planned = build();
    if (planned) {
      std::unique_ptr<KernelPlan> plan = planned.take();
      std::string partly = plan->on_reference_kernels();
      return {std::move(plan), partly.empty() ? "" : std::string(builder) + ": " + partly};
    }
    if (!planned.reason().empty())
      declined += (declined.empty() ? "" : "; ") + std::string(builder) + " declined: " + planned.reason();
  }
  if (declined.empty()) {  // no builder covers its ops
    declined = "no fast plan for";
    for (uint32_t i = 0; i < kernel.num_ops; ++i) declined += std::string(i ? ", " : " ") + ops::name(kernel.ops[i].op);
  }
  return {make_reference_plan(kernel, values), declined};
}

class CpuExecutable : public plugin::HostExecutable {
 public:
  CpuExecutable(const lazylab_program& program, std::shared_ptr<plugin::HostMemoryPool> pool,
                const RowPlanOptions& options, const openblas::Runtime& blas, bool strict)
      : HostExecutable(program, std::move(pool)),
        blas_(blas),
        blas_threads_(options.arena ? options.arena->max_concurrency() : 1),
        values_(copy_values(program)),
        arena_(static_cast<std::byte*>(::operator new (place_products(program, values_) + 64, std::align_val_t{64}))),
        outputs_(program.outputs, program.outputs + program.num_outputs) {
    std::string without_fast_plan;  // strict: every such kernel, named in one error
    int64_t panel_floats = 0;
    for (uint32_t k = 0; k < program.num_kernels; ++k) {
      const lazylab_kernel& kernel = program.kernels[k];
      KernelChoice choice = choose_plan(kernel, values_, options, blas);
      if (!choice.on_reference_kernels.empty()) {
        std::string where = std::string(lazylab_kernel_kind_name(kernel.kind)) + ": " + choice.on_reference_kernels;
        reference_notes_[where].push_back(k);
        if (strict && kernel.kind != LAZYLAB_KERNEL_OPAQUE && of_covered_dtypes(kernel))
          without_fast_plan += "\n  kernel " + std::to_string(k) + " (" + where + ")";
      }
      panel_floats = std::max(panel_floats, choice.plan->panel_floats());
      plans_.push_back(std::move(choice.plan));
    }
    panels_ = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(panel_floats));
    if (!without_fast_plan.empty())
      throw std::runtime_error("cpu (strict): kernels with no fast plan, which would run on the reference kernels:" +
                               without_fast_plan);
  }

  // Which kernels run on the reference kernels, and why: kernels for one
  // reason on one line.
  std::string notes() const override {
    std::string notes;
    for (const auto& [where, kernels] : reference_notes_) {
      std::string list;
      for (uint32_t k : kernels) list += (list.empty() ? "" : ", ") + std::to_string(k);
      notes += (kernels.size() == 1 ? "kernel " : "kernels ") + list + " on the reference kernels (" + where + ")\n";
    }
    return notes;
  }

  void run(const void* const* parameters, void* const* outputs) override { run_kernels(parameters, outputs, nullptr); }
  void run_timing_kernels(const void* const* parameters, void* const* outputs,
                          std::vector<double>& kernel_ms) override {
    run_kernels(parameters, outputs, &kernel_ms);
  }

 private:
  void run_kernels(const void* const* parameters, void* const* outputs, std::vector<double>* kernel_ms) {
    // OpenBLAS's thread count is one per process: another cpu backend (other
    // `threads`) or the host's ceilings may have run since this one's last
    // step, so each step sets this backend's.
    blas_.set_num_threads(blas_threads_);
    Memory memory{&values_, arena_.get(), parameters, outputs, panels_.get()};
    for (auto& plan : plans_) plugin::run_kernel_timed(kernel_ms, [&] { plan->run(memory); });
    for (size_t i = 0; i < outputs_.size(); ++i) {  // outputs not written in place
      const ValueInfo& value = values_[outputs_[i]];
      if (value.kind != LAZYLAB_VALUE_OUTPUT || value.ordinal != static_cast<int64_t>(i))
        std::memcpy(outputs[i], memory.address(outputs_[i]), value.bytes);
    }
  }

  bool of_covered_dtypes(const lazylab_kernel& kernel) const {
    auto covered = [&](uint32_t value) {
      uint32_t dtype = values_[value].dtype;
      return dtype == LAZYLAB_F32 || dtype == LAZYLAB_BOOL || dtype == LAZYLAB_I64;
    };
    for (uint32_t i = 0; i < kernel.num_ops; ++i) {
      if (!covered(kernel.ops[i].result)) return false;
      for (uint32_t k = 0; k < kernel.ops[i].num_operands; ++k)
        if (!covered(kernel.ops[i].operands[k])) return false;
    }
    return true;
  }

  const openblas::Runtime& blas_;
  int blas_threads_;
  std::vector<ValueInfo> values_;
  std::unique_ptr<std::byte, AlignedFree> arena_;
  std::unique_ptr<float[]> panels_;  // Memory::panels
  std::vector<uint32_t> outputs_;
  std::vector<std::unique_ptr<KernelPlan>> plans_;
  std::map<std::string, std::vector<uint32_t>> reference_notes_;  // why -> the kernels running there
};

class CpuBackend : public plugin::Backend {
 public:
  static constexpr lazylab_option_spec kOptions[] = {
      {"threads", LAZYLAB_OPTION_INT, "0", "TBB and OpenBLAS threads; 0: one per hardware thread", nullptr, 0},
      {"tile", LAZYLAB_OPTION_INT, "4096", "elements a segment of a row/tile loop that does not reduce", nullptr, 1},
      {"stream", LAZYLAB_OPTION_INT, "8192",
       "output KiB from which a kernel writes past the caches (which keep the next step's inputs)", nullptr, 1},
      {"strict", LAZYLAB_OPTION_BOOL, "off",
       "fail, naming each kernel, instead of falling back to the reference kernels", nullptr, 0},
      {"row-groups", LAZYLAB_OPTION_BOOL, "on", "read a per-channel value over NCHW's rows in place (ABI 3.10)",
       nullptr, 0},
      {"direct-conv", LAZYLAB_OPTION_BOOL, "on",
       "convolutions computed directly on AVX-512 (groups of 1 over the input's phase planes, phase_conv.h; depthwise "
       "3x3 ones, depthwise_conv.h), the epilogue on each block of outputs in cache; off: groups of 1 unfolded into "
       "OpenBLAS products, depthwise ones a tap at a time",
       nullptr, 0},
      {"openblas-core", LAZYLAB_OPTION_STRING, "",
       "OpenBLAS's kernels: a core name (Haswell, SkylakeX, ...) or auto (lazylab's choice for this CPU, over "
       "OPENBLAS_CORETYPE); empty: OPENBLAS_CORETYPE, else lazylab's choice. Chosen once a process",
       nullptr, 0},
  };

  explicit CpuBackend(const plugin::BackendOptions& options) {
    int64_t threads = options.integer("threads");
    threads_ = threads > 0 ? static_cast<int>(std::min<int64_t>(threads, std::numeric_limits<int>::max()))
                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    row_options_.tile = options.integer("tile");
    // KiB to bytes; more than any output can have means never.
    int64_t stream_kib = options.integer("stream");
    constexpr int64_t kMaxKib = std::numeric_limits<int64_t>::max() >> 10;
    row_options_.stream_min = stream_kib > kMaxKib ? std::numeric_limits<int64_t>::max() : stream_kib << 10;
    strict_ = options.flag("strict");
    row_groups_ = options.flag("row-groups");
    row_options_.direct_conv = options.flag("direct-conv");
    arena_ = std::make_unique<tbb::task_arena>(threads_);
    row_options_.arena = arena_.get();
    const std::string& core = options.text("openblas-core");
    std::string error;
    if (!core.empty() && !openblas::choose_core(core, error))
      throw std::runtime_error("openblas-core=" + core + ": " + error);
    blas_ = openblas::runtime(error);
    if (!blas_) throw std::runtime_error("cpu backend needs OpenBLAS: " + error);
    blas_->set_num_threads(threads_);
    host_ceilings_ = std::make_unique<HostCeilingsProbe>(blas_, "", threads_);
  }

  // The host's ceilings (ABI 3.12): this backend runs on the host's cores.
  plugin::HostCeilings measure_host_ceilings(bool quick) { return host_ceilings_->measure(quick); }

  // Composites must be decomposed first; everything else runs.
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op)
      caps.supports_op[op] =
          op != LAZYLAB_OP_Parameter && op != LAZYLAB_OP_Softmax && op != LAZYLAB_OP_Layernorm && op != LAZYLAB_OP_Gelu;
    // Every dtype: what the plans do not run in theirs runs on the reference.
    for (uint32_t dtype = 0; dtype < LAZYLAB_DTYPE_COUNT; ++dtype) caps.supports_dtype[dtype] = 1;
    caps.fuses_elementwise = 1;
    caps.fuses_reduction_prologue = 1;
    caps.fuses_gemm_epilogue = 1;
    caps.fuses_window_epilogue = 1;
    caps.fuses_layout_views = 1;
    caps.attention_max_head_dim = 1 << 20;  // attention_plan.h: any head dim OpenBLAS takes
    caps.attention_masks = 1;               // attention_plan.h: a bool [m, n] mask applied to each row
    caps.reads_row_groups = row_groups_ ? 1 : 0;
    caps.max_ops_per_kernel = 0;
  }

  std::string device_description() const override {
    return "host CPU, " + std::to_string(threads_) + " threads (TBB), " + blas_->config + ", core " + blas_->core +
           " (" + blas_->core_note + ")";
  }

  std::unique_ptr<plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<CpuExecutable>(program, host_memory_, row_options_, *blas_, strict_);
  }

 private:
  bool row_groups_ = true;
  int threads_ = 1;
  bool strict_ = false;
  std::unique_ptr<tbb::task_arena> arena_;
  RowPlanOptions row_options_;
  const openblas::Runtime* blas_ = nullptr;
  std::unique_ptr<HostCeilingsProbe> host_ceilings_;
};

// The declared defaults are RowPlanOptions' (which tests building plans
// directly use): one value each, checked here.
constexpr int64_t declared_default(std::string_view name) {
  for (const lazylab_option_spec& spec : CpuBackend::kOptions)
    if (name == spec.name) {
      int64_t value = 0;
      for (const char* digit = spec.default_value; *digit; ++digit) value = value * 10 + (*digit - '0');
      return value;
    }
  return -1;
}
static_assert(declared_default("tile") == RowPlanOptions{}.tile);
static_assert(declared_default("stream") << 10 == RowPlanOptions{}.stream_min);
constexpr bool declared_on(std::string_view name) {
  for (const lazylab_option_spec& spec : CpuBackend::kOptions)
    if (name == spec.name) return std::string_view(spec.default_value) == "on";
  return false;
}
static_assert(declared_on("direct-conv") == RowPlanOptions{}.direct_conv);

}  // namespace
}  // namespace lazylab::cpu

LAZYLAB_DEFINE_BACKEND(lazylab::cpu::CpuBackend, "cpu",
                       "OpenBLAS contractions and fused row/tile loops on TBB; reference kernels for the rest")
