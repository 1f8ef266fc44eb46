#include "gemm_plan.h"

#include "reference_plan.h"

#include <algorithm>

#include "banded_sgemm.h"
#include "narrow_panels.h"
#include "parallel.h"

namespace lazylab::cpu {
namespace {

struct Operand {
  uint32_t value;
  bool transposed = false;
};

class GemmPlan : public KernelPlan {
 public:
  GemmPlan(Operand a, Operand b, uint32_t out, const ValueInfo& out_info, int64_t k,
           std::unique_ptr<RowKernelPlan> epilogue, const RowPlanOptions& options, const openblas::Runtime& blas)
      : a_(a), b_(b), out_(out), k_(k), epilogue_(std::move(epilogue)), arena_(options.arena), blas_(blas) {
    size_t r = out_info.shape.size();
    m_ = out_info.shape[r - 2];
    n_ = out_info.shape[r - 1];
    batches_ = out_info.size() / (m_ * n_);
    if (is_narrow_float(out_info.dtype)) narrow_ = out_info.dtype;
    epilogue_per_batch_ = epilogue_ && epilogue_->rows() == batches_ * m_ && epilogue_->cols() == n_;
    threads_ = arena_ ? arena_->max_concurrency() : 1;
    vector_ = batches_ == 1 && m_ == 1;
    batches_in_parallel_ = threads_ > 1 && batches_ >= threads_ && m_ * n_ * k_ <= kSmallProduct;
    split_k_ = !vector_ && threads_ > 1 && batches_ == 1 && m_ * n_ <= kNarrowOutput && k_ >= kSplitDepth * threads_;
    if (split_k_) partials_.resize(static_cast<size_t>((threads_ - 1) * m_ * n_));
    rows_in_parallel_ =
        threads_ > 1 && batches_ == 1 && !split_k_ && m_ * n_ * k_ <= kSmallProduct && m_ >= kLeastRows * threads_;
  }

  // A 16-bit product's operands widened, and sgemm's sums: Memory::panels
  // from there, a 64-byte line apart.
  int64_t panel_floats() const override {
    return narrow_ == LAZYLAB_F32 ? 0 : c_panel() + whole_lines(batches_ * m_ * n_);
  }

  void run(const Memory& memory) override {
    if (narrow_ != LAZYLAB_F32) {
      widen_panel(arena_, narrow_, static_cast<const uint16_t*>(memory.address(a_.value)), memory.panels,
                  batches_ * m_ * k_);
      widen_panel(arena_, narrow_, static_cast<const uint16_t*>(memory.address(b_.value)), memory.panels + b_panel(),
                  batches_ * k_ * n_);
    }
    if (vector_) {
      run_vector(memory);
    } else if (split_k_) {
      run_split_k(memory);
    } else if (rows_in_parallel_) {
      run_row_bands(memory);
    } else if (batches_in_parallel_) {
      // Small products keep one thread busy each; OpenBLAS's own threads would
      // only synchronise. One thread per sgemm, so calls do not contend.
      blas_.set_num_threads(1);
      parallel_chunks(*arena_, 0, batches_, 1, [&](int64_t first, int64_t end) {
        for (int64_t batch = first; batch < end; ++batch) run_batch(memory, batch);
      });
      blas_.set_num_threads(threads_);
    } else {
      for (int64_t batch = 0; batch < batches_; ++batch) run_batch(memory, batch);
    }
    if (epilogue_ && !epilogue_per_batch_) epilogue_->run(memory);
  }

 private:
  // 256 x 256 x 64 (one attention head's Q K^T) is small; a 256 x 3072 x 768
  // projection is not.
  static constexpr int64_t kSmallProduct = int64_t{1} << 23;
  // A narrow output over a deep sum (a convolution's weight gradient at one
  // kernel tap: 16 x 16 over 4096 positions) gives OpenBLAS's threads
  // little to share: each thread sums its own slice of k instead.
  static constexpr int64_t kNarrowOutput = 64 * 64, kSplitDepth = 512;
  // A small product of one batch (a GPT's 256 x 256 x 64 projections) is
  // cut into bands of rows, one sgemm on each TBB thread, each band's
  // epilogue right after its product: OpenBLAS's own threads, which spin
  // for their next call while TBB's threads run the epilogue and the
  // kernels after it, are then not woken at all.
  static constexpr int64_t kLeastRows = 32;

  void run_row_bands(const Memory& memory) {
    row_bands(blas_, *arena_, product(memory, 0), [&](int64_t first_row, int64_t rows) {
      store_rows(memory, first_row, first_row + rows);
      if (epilogue_per_batch_) epilogue_->run_rows_here(memory, first_row, first_row + rows);
    });
  }

  int64_t b_panel() const { return whole_lines(batches_ * m_ * k_); }
  int64_t c_panel() const { return b_panel() + whole_lines(batches_ * k_ * n_); }

  // A 16-bit product's rows [first_row, end_row) (of all batches' rows),
  // rounded once from sgemm's f32 sums into its memory, while in cache.
  void store_rows(const Memory& memory, int64_t first_row, int64_t end_row) const {
    if (narrow_ == LAZYLAB_F32) return;
    auto* out = static_cast<uint16_t*>(memory.address(out_));
    narrow(narrow_, memory.panels + c_panel() + first_row * n_, out + first_row * n_, (end_row - first_row) * n_);
  }

  // A product of one row (a classifier at one image, a decoding step) is a
  // matrix times a vector, which sgemm packs B for and sgemv streams:
  // ResNet-18's 512 x 1000 classifier (2 MB of weights, out of cache) took
  // 71 us as sgemm and 43 as sgemv on a 2-core Xeon. Bands of at least
  // kLeastColumns columns, one sgemv on each TBB thread.
  static constexpr int64_t kLeastColumns = 256;

  void run_vector(const Memory& memory) {
    SgemmOperands p = product(memory, 0);
    const int64_t bands = std::max<int64_t>(1, std::min<int64_t>(threads_, n_ / kLeastColumns));
    const int64_t width = (n_ + bands - 1) / bands;
    const int incx = static_cast<int>(p.trans_a == CblasTrans ? p.lda : 1);
    if (k_ == 0) std::fill(p.c, p.c + n_, 0.0f);  // sgemv returns at once, writing nothing
    auto band = [&](int64_t first, int64_t end) {
      if (k_ == 0) return;
      for (int64_t b = first; b < end; ++b) {
        const int64_t c0 = b * width, count = std::min(n_, c0 + width) - c0;
        if (count <= 0) continue;
        if (p.trans_b == CblasTrans)  // B is [n, k]: its rows c0.. times a
          blas_.sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(count), static_cast<int>(k_), 1.0f,
                      p.b + c0 * p.ldb, static_cast<int>(p.ldb), p.a, incx, p.beta, p.c + c0, 1);
        else  // B is [k, n]: a times its columns c0..
          blas_.sgemv(CblasRowMajor, CblasTrans, static_cast<int>(k_), static_cast<int>(count), 1.0f, p.b + c0,
                      static_cast<int>(p.ldb), p.a, incx, p.beta, p.c + c0, 1);
      }
    };
    if (bands > 1) {
      blas_.set_num_threads(1);
      parallel_chunks(*arena_, 0, bands, 1, band);
      blas_.set_num_threads(threads_);
    } else {
      band(0, 1);
    }
    store_rows(memory, 0, 1);
    if (epilogue_per_batch_) epilogue_->run_rows(memory, 0, 1);
  }

  void run_split_k(const Memory& memory) {
    SgemmOperands whole = product(memory, 0);
    int64_t slice = (k_ + threads_ - 1) / threads_;
    blas_.set_num_threads(1);
    parallel_chunks(*arena_, 0, threads_, 1, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        int64_t k0 = t * slice, depth = std::min(k_, k0 + slice) - k0;
        float* into = t == 0 ? whole.c : partials_.data() + (t - 1) * m_ * n_;
        if (depth <= 0) {
          std::fill(into, into + m_ * n_, 0.0f);
          continue;
        }
        SgemmOperands part = depths_of(whole, k0, depth);
        part.c = into;
        sgemm(blas_, part);
      }
    });
    blas_.set_num_threads(threads_);
    for (int64_t t = 1; t < threads_; ++t) {
      const float* partial = partials_.data() + (t - 1) * m_ * n_;
      for (int64_t i = 0; i < m_ * n_; ++i) whole.c[i] += partial[i];
    }
    store_rows(memory, 0, m_);
    if (epilogue_per_batch_) epilogue_->run_rows(memory, 0, m_);
  }

  void run_batch(const Memory& memory, int64_t batch) {
    sgemm(blas_, product(memory, batch));
    store_rows(memory, batch * m_, (batch + 1) * m_);
    if (epilogue_per_batch_) epilogue_->run_rows(memory, batch * m_, (batch + 1) * m_);
  }

  // Batch `batch`'s product, C = A B, as sgemm takes it (a 16-bit
  // product's from and into its f32 panels).
  SgemmOperands product(const Memory& memory, int64_t batch) const {
    bool narrow = narrow_ != LAZYLAB_F32;
    const float* a = narrow ? memory.panels : memory.f32(a_.value);
    const float* b = narrow ? memory.panels + b_panel() : memory.f32(b_.value);
    float* c = narrow ? memory.panels + c_panel() : memory.f32(out_);
    return {.trans_a = a_.transposed ? CblasTrans : CblasNoTrans,
            .trans_b = b_.transposed ? CblasTrans : CblasNoTrans,
            .m = m_,
            .n = n_,
            .k = k_,
            .a = a + batch * m_ * k_,
            .lda = a_.transposed ? m_ : k_,
            .b = b + batch * k_ * n_,
            .ldb = b_.transposed ? k_ : n_,
            .beta = 0.0f,
            .c = c + batch * m_ * n_,
            .ldc = n_};
  }

  Operand a_, b_;
  uint32_t out_;
  int64_t m_ = 0, n_ = 0, k_, batches_ = 0;
  std::unique_ptr<RowKernelPlan> epilogue_;
  bool epilogue_per_batch_ = false, batches_in_parallel_ = false, split_k_ = false, rows_in_parallel_ = false;
  bool vector_ = false;            // one row: sgemv
  std::vector<float> partials_;    // threads - 1 partial products of a split k
  uint32_t narrow_ = LAZYLAB_F32;  // BF16 or F16: a 16-bit product, computed in f32 panels
  tbb::task_arena* arena_;
  int threads_ = 1;
  const openblas::Runtime& blas_;
};

// The product on sgemm, then an epilogue the row loops do not run (a bool
// compare, an integer op) on the reference kernels: a backward's
// select(x > 0, grad, 0) after a product no longer takes the product along.
class ProductThenReference : public KernelPlan {
 public:
  ProductThenReference(std::unique_ptr<KernelPlan> product, std::unique_ptr<KernelPlan> epilogue, std::string why)
      : product_(std::move(product)), epilogue_(std::move(epilogue)), why_(std::move(why)) {}
  void run(const Memory& memory) override {
    product_->run(memory);
    epilogue_->run(memory);
  }
  std::string on_reference_kernels() const override { return why_; }
  int64_t panel_floats() const override { return product_->panel_floats(); }

 private:
  std::unique_ptr<KernelPlan> product_, epilogue_;
  std::string why_;
};

}  // namespace

Planned<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   const RowPlanOptions& options, const openblas::Runtime& blas) {
  if (!lazylab_kernel_described(&kernel) || kernel.kind != LAZYLAB_KERNEL_CONTRACTION) return nullptr;
  const lazylab_contraction& c = kernel.contraction;
  uint32_t dtype = values[c.matmul].dtype;
  if (!computes_in_f32(dtype)) return decline("a product not of f32, bf16 or f16");
  if (values[c.lhs].dtype != dtype || values[c.rhs].dtype != dtype) return decline("operands of another dtype");
  // (A GemmPlan counts batches as elements / (m * n): an empty product
  // divided by zero and took the process down.)
  if (values[c.matmul].size() == 0) return decline("a product of no elements");
  if (values[c.matmul].kind == LAZYLAB_VALUE_KERNEL_LOCAL) return decline("the product has no memory for sgemm");
  // The epilogue: every op but the product and the transposes folded into it.
  std::vector<uint32_t> folded;
  for (uint32_t i = 0; i < kernel.num_ops; ++i)
    if (kernel.ops[i].result == c.matmul) {
      if (c.lhs_transposed) folded.push_back(kernel.ops[i].operands[0]);
      if (c.rhs_transposed) folded.push_back(kernel.ops[i].operands[1]);
    }
  std::vector<lazylab_op> epilogue;
  for (uint32_t i = 0; i < kernel.num_ops; ++i) {
    uint32_t result = kernel.ops[i].result;
    if (result != c.matmul && std::find(folded.begin(), folded.end(), result) == folded.end())
      epilogue.push_back(kernel.ops[i]);
  }
  std::unique_ptr<RowKernelPlan> epilogue_plan;
  if (!epilogue.empty()) {
    lazylab_kernel part = kernel;  // the same description: the product's row space
    part.num_ops = static_cast<uint32_t>(epilogue.size());
    part.ops = epilogue.data();
    Planned<RowKernelPlan> planned = make_row_plan(part, values, options);
    epilogue_plan = planned.take();
    bool reads_folded = std::any_of(epilogue.begin(), epilogue.end(), [&](const lazylab_op& op) {
      return std::any_of(op.operands, op.operands + op.num_operands,
                         [&](uint32_t v) { return std::find(folded.begin(), folded.end(), v) != folded.end(); });
    });
    if (!epilogue_plan && reads_folded)
      return decline("the epilogue reads a folded transpose, and its row loops declined: " + planned.reason());
    if (!epilogue_plan)
      return std::make_unique<ProductThenReference>(
          std::make_unique<GemmPlan>(Operand{c.lhs, c.lhs_transposed != 0}, Operand{c.rhs, c.rhs_transposed != 0},
                                     c.matmul, values[c.matmul], c.k, nullptr, options, blas),
          make_reference_plan(part, values), "the epilogue's row loops declined: " + planned.reason());
  }
  return std::make_unique<GemmPlan>(Operand{c.lhs, c.lhs_transposed != 0}, Operand{c.rhs, c.rhs_transposed != 0},
                                    c.matmul, values[c.matmul], c.k, std::move(epilogue_plan), options, blas);
}

}  // namespace lazylab::cpu
