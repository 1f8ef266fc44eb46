// A contraction's product on cuBLASLt, its algorithm chosen by timing the
// heuristic's candidates (and a configuration search) once, then read from
// the disk cache. Included by backend.cpp.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "algo_choice.h"
#include "compiler.h"
#include "device.h"
#include "lazylab/dtype_table.hpp"
#include "product_types.h"

namespace lazylab::cuda {

// cuBLASLt algorithms timed per product shape. Asked for 16, its heuristic
// gave 3 to 8 for the suite's shapes on an H100 (cuBLASLt 13), and its first
// was the fastest of them each time.
constexpr int kAlgoCandidates = 8;
constexpr uint64_t kMaxAutotuneBytes = uint64_t{2} << 30;  // operands larger than this: the heuristic's choice
// A product whose heuristic first takes longer than this times only the
// heuristic's candidates: the configuration search (about 70 more timings
// for f32) would cost more compile time than it could save.
constexpr float kMaxSearchMs = 5.0f;
constexpr int kFinalists = 3;  // timed again, with more runs, after every candidate once
// Each candidate's screening runs fill about kScreeningMs (at most
// kMaxScreeningRuns), each finalist's about kFinalMs (kMaxFinalRuns).
constexpr float kScreeningMs = 0.05f, kFinalMs = 0.2f;
constexpr int kMaxScreeningRuns = 8, kMaxFinalRuns = 32;
// Candidates timed in one graph: some 400 nodes at most.
constexpr size_t kCandidatesAGraph = 48;

// Runs of a product taking `ms` that fill about `fill_ms`: 1 to `most`.
inline int runs_filling(float ms, float fill_ms, int most) {
  if (!(ms > 0)) return 1;
  return static_cast<int>(std::clamp(std::ceil(fill_ms / ms), 1.0f, static_cast<float>(most)));
}

// What cuBLASLt does to the f32 sums before rounding them into D: nothing,
// adds a bias vector along the rows, or applies gelu (tanh form) to that.
enum class ProductEpilogue { kNone = 0, kBias = 1, kGeluBias = 2 };

// A cuBLASLt product D = A B over row-major matrices of one dtype (f32, bf16
// or f16: product_types.h), batched: computed as the column-major
// D^T = B^T A^T, so cuBLASLt's first operand is B's memory and its second A's.
class Product {
 public:
  // With a bias, cuBLASLt adds a vector of n (of the product's dtype) along
  // each row of the product (its BIAS epilogue: in D^T's column-major terms,
  // one value per row), and with kGeluBias applies gelu to the sum (its
  // GELU_BIAS epilogue). With `shared_lhs`, every batch reads the one
  // [m, k] lhs (a convolution's weights, for every image). `compiler` says
  // where the disk cache keeps cuBLASLt's choices. Throws for a dtype
  // product_types() has no entry for.
  Product(const Device& device, const CompilerOptions& compiler, const lazylab_contraction& c, uint32_t dtype,
          bool tf32, ProductEpilogue epilogue, float alpha = 1.0f, bool shared_lhs = false)
      : device_(device),
        c_(c),
        dtype_(dtype),
        epilogue_(epilogue),
        bias_(epilogue != ProductEpilogue::kNone),
        alpha_(alpha),
        shared_lhs_(shared_lhs) {
    std::optional<ProductTypes> types = product_types(dtype, tf32);
    if (!types) throw std::invalid_argument(fmt::format("cuBLASLt runs no product of {}", dtypes::name(dtype)));
    types_ = *types;
    const CublasLt& b = device.blas;
    check(b.cublasLtMatmulDescCreate(&desc_, types_.compute, types_.scale), "cublasLtMatmulDescCreate");
    if (bias_) {
      cublasLtEpilogue_t lt_epilogue =
          epilogue == ProductEpilogue::kGeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
      cudaDataType_t type = types_.data;
      b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epilogue, sizeof lt_epilogue);
      b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
    }
    cublasOperation_t first = c.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t second = c.lhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first);
    b.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second);
    // B's memory: [k, n] row-major is column-major n x k (ld n); transposed,
    // [n, k] row-major is column-major k x n (ld k). Likewise for A.
    first_ = layout(c.rhs_transposed ? c.k : c.n, c.rhs_transposed ? c.n : c.k, c.k * c.n);
    second_ = layout(c.lhs_transposed ? c.m : c.k, c.lhs_transposed ? c.k : c.m, shared_lhs ? 0 : c.m * c.k);
    out_ = layout(c.n, c.m, c.m * c.n);
    choice_ = choose_algo(compiler, tf32);
    algo_ = choice_.algo;
  }

 private:
  // The fastest of cuBLASLt's first heuristic choices for this shape, each
  // timed on this device: once per shape and device in a process, and once
  // per machine where the disk cache is on.
  AlgoChoice choose_algo(const CompilerOptions& compiler, bool tf32) {
    ProductKey key = {
        c_.batch, c_.m,   c_.n,       c_.k, c_.lhs_transposed, c_.rhs_transposed, static_cast<int64_t>(epilogue_),
        tf32,     dtype_, shared_lhs_};
    std::lock_guard<std::mutex> lock(device_.algo_mutex);
    if (auto it = device_.algos.find(key); it != device_.algos.end()) {
      AlgoChoice again = it->second;
      again.source = AlgoChoice::Source::Process;
      return again;
    }
    std::string path;
    if (compiler.disk_cache) {
      path = algo_choice_path(cache_directory(compiler), identity(key, compiler));
      std::string why;
      if (auto stored = load_algo_choice(path, why); stored && runs(stored->algo)) {
        device_.algos.emplace(key, *stored);
        return *stored;
      }
    }
    AlgoChoice choice = time_candidates();
    device_.algos.emplace(key, choice);
    if (!path.empty() && choice.source == AlgoChoice::Source::Timed) store_algo_choice(path, choice);
    return choice;
  }

  // What a stored choice is valid for: the shape, the device and the
  // libraries that timed it.
  std::string identity(const ProductKey& key, const CompilerOptions& compiler) const {
    return fmt::format(
        "{}|{}|{}|cublasLt {}|driver {}|candidates {} and configurations, split-K in f32, timed in graphs",
        fmt::join(key, " "), device_.name, device_.arch(), device_.blas.cublasLtGetVersion(), compiler.driver_version,
        kAlgoCandidates);
  }

  // Whether cuBLASLt accepts `algo` for this product (one read from disk
  // is checked before it is trusted).
  bool runs(const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t result{};
    return device_.blas.cublasLtMatmulAlgoCheck(device_.lt, desc_, first_, second_, out_, out_, &algo, &result) ==
               CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= kWorkspaceBytes;
  }

  AlgoChoice time_candidates() {
    const CublasLt& b = device_.blas;
    cublasLtMatmulPreference_t preference = nullptr;
    check(b.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    size_t workspace = kWorkspaceBytes;
    b.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                           sizeof workspace);
    std::array<cublasLtMatmulHeuristicResult_t, kAlgoCandidates> results{};
    int found = 0;
    cublasStatus_t status = b.cublasLtMatmulAlgoGetHeuristic(device_.lt, desc_, first_, second_, out_, out_, preference,
                                                             kAlgoCandidates, results.data(), &found);
    b.cublasLtMatmulPreferenceDestroy(preference);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for a {} x [{} x {}] x [{} x {}] product",
                                           c_.batch, c_.m, c_.k, c_.k, c_.n));
    std::vector<cublasLtMatmulAlgo_t> candidates;
    for (int i = 0; i < found; ++i) candidates.push_back(results[i].algo);
    return fastest(std::move(candidates));
  }

  // Every configuration cuBLASLt accepts for this product: each algorithm's
  // tiles, stages and CTA swizzling. The heuristic names a few of them; for
  // mlp's f32 products on an H100 its first was 3.7% and 2.8% slower than
  // the fastest configuration (1.376 against 1.325 ms, 1.353 against 1.315).
  std::vector<cublasLtMatmulAlgo_t> configurations() const {
    const CublasLt& b = device_.blas;
    const ProductTypes& t = types_;
    std::array<int, 64> ids{};
    int count = 0;
    if (b.cublasLtMatmulAlgoGetIds(device_.lt, t.compute, t.scale, t.data, t.data, t.data, t.data,
                                   static_cast<int>(ids.size()), ids.data(), &count) != CUBLAS_STATUS_SUCCESS)
      return {};
    std::vector<cublasLtMatmulAlgo_t> found;
    for (int i = 0; i < count; ++i) {
      cublasLtMatmulAlgo_t algo{};
      if (b.cublasLtMatmulAlgoInit(device_.lt, t.compute, t.scale, t.data, t.data, t.data, t.data, ids[i], &algo) !=
          CUBLAS_STATUS_SUCCESS)
        continue;
      int swizzling = 0;
      size_t written = 0;
      b.cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzling, sizeof swizzling,
                                          &written);
      const std::vector<int> splits = split_k_counts(algo);
      for (int tile : capability_ids(algo, CUBLASLT_ALGO_CAP_TILE_IDS))
        for (int stages : capability_ids(algo, CUBLASLT_ALGO_CAP_STAGES_IDS))
          for (int swizzle = 0; swizzle <= (swizzling ? 1 : 0); ++swizzle)
            for (int split_k : splits) {
              cublasLtMatmulAlgo_t config = algo;
              // Split parts summed in f32 (the compute type) in the workspace,
              // not in the output's 16 bits: no more rounding than one pass.
              const uint32_t scheme =
                  split_k > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
              b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
              b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages);
              b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                                     sizeof swizzle);
              b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k,
                                                     sizeof split_k);
              b.cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                     sizeof scheme);
              if (runs(config)) found.push_back(config);
            }
    }
    return found;
  }

  // How many parts to split the depth into: 1, and where the algorithm
  // splits and sums the parts in f32, 2, 4 and 8 for a product whose depth
  // is 4 times its rows and columns or more, which has few output tiles for
  // its work (BERT's and GPT-2's [128 x 3072] x [3072 x 768]: 24 tiles of
  // 64 x 64 for 132 SMs; a weight gradient over a batch's rows).
  std::vector<int> split_k_counts(const cublasLtMatmulAlgo_t& algo) const {
    const CublasLt& b = device_.blas;
    int splits = 0;
    uint32_t schemes = 0;
    size_t written = 0;
    b.cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splits, sizeof splits, &written);
    b.cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes,
                                        &written);
    const bool long_depth = c_.k >= 4 * std::max<int64_t>(c_.m, c_.n);
    if (!splits || !(schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) || !long_depth) return {1};
    return {1, 2, 4, 8};
  }

  // An algorithm's list of tile or stage ids; {0} (cuBLASLt's "undefined",
  // its own choice) where it has none.
  std::vector<int> capability_ids(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t what) const {
    const CublasLt& b = device_.blas;
    size_t bytes = 0;
    b.cublasLtMatmulAlgoCapGetAttribute(&algo, what, nullptr, 0, &bytes);
    std::vector<int> ids(bytes / sizeof(int));
    if (ids.empty() ||
        b.cublasLtMatmulAlgoCapGetAttribute(&algo, what, ids.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
      return {0};
    return ids;
  }

  // Times every candidate on scratch operands, then the fastest few again
  // with more runs, and keeps the fastest of those; the heuristic's first
  // where the operands would not fit or every candidate fails. The
  // heuristic's candidates come first; where its first is quick to time,
  // every configuration of cuBLASLt's algorithms follows. Each timing is a
  // CUDA graph of back-to-back runs, as an executable's step replays them:
  // one launch between two events also timed cublasLtMatmul's host work
  // (the GPU waits for it), a few microseconds that varied from candidate to
  // candidate and from call to call as much as the products of seq 128 take,
  // so the ranking of BERT's 768 x 768 products flipped between builds.
  AlgoChoice fastest(std::vector<cublasLtMatmulAlgo_t> candidates) {
    const Driver& d = device_.driver;
    // Each operand 256-byte aligned, as the arena places them.
    const uint64_t element_bytes = dtypes::size(dtype_);
    auto aligned = [&](uint64_t elements) { return (elements * element_bytes + 255) / 256 * 256; };
    const uint64_t lhs_bytes = aligned((shared_lhs_ ? 1 : c_.batch) * c_.m * c_.k),
                   rhs_bytes = aligned(c_.batch * c_.k * c_.n);
    const uint64_t out_bytes = aligned(c_.batch * c_.m * c_.n),
                   bytes = lhs_bytes + rhs_bytes + out_bytes + aligned(c_.n);
    AlgoChoice heuristic{candidates[0], 0, {}, AlgoChoice::Source::Heuristic};
    if (bytes > kMaxAutotuneBytes) return heuristic;
    CUdeviceptr scratch = 0;
    if (d.cuMemAlloc(&scratch, bytes) != CUDA_SUCCESS) return heuristic;
    CUdeviceptr lhs = scratch, rhs = lhs + lhs_bytes, out = rhs + rhs_bytes, bias = out + out_bytes;
    d.cuMemsetD8Async(scratch, 0x3c, bytes, device_.stream);  // not zero: f32 0.0115, bf16 0.0115, f16 1.06
    d.cuStreamSynchronize(device_.stream);
    // A stream of its own to capture on: an executable on another thread may
    // be capturing its step on the device's.
    CUstream capture = nullptr;
    if (d.cuStreamCreate(&capture, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
      d.cuMemFree(scratch);
      return heuristic;
    }
    CUevent start = nullptr, stop = nullptr;
    d.cuEventCreate(&start, CU_EVENT_DEFAULT);
    d.cuEventCreate(&stop, CU_EVENT_DEFAULT);
    // The mean of `runs` back-to-back runs in one graph, launched once to
    // warm up; negative where the candidate cannot run the product.
    auto time = [&](const cublasLtMatmulAlgo_t& algo, int runs) -> float {
      algo_ = algo;
      CUgraphExec graph = back_to_back(capture, lhs, rhs, out, bias, runs);
      if (!graph) return -1;
      float ms = -1;
      if (d.cuGraphLaunch(graph, device_.stream) == CUDA_SUCCESS &&
          d.cuEventRecord(start, device_.stream) == CUDA_SUCCESS &&
          d.cuGraphLaunch(graph, device_.stream) == CUDA_SUCCESS &&
          d.cuEventRecord(stop, device_.stream) == CUDA_SUCCESS && d.cuEventSynchronize(stop) == CUDA_SUCCESS &&
          d.cuEventElapsedTime(&ms, start, stop) == CUDA_SUCCESS)
        ms /= static_cast<float>(runs);
      else
        ms = -1;
      d.cuGraphExecDestroy(graph);
      return ms;
    };
    std::vector<CUevent> marks(kCandidatesAGraph + 1, nullptr);
    for (CUevent& mark : marks) d.cuEventCreate(&mark, CU_EVENT_DEFAULT);
    // candidates[which[i]]'s mean over `runs` runs for each i, up to
    // kCandidatesAGraph of them in one graph; those of a graph that could
    // not be captured or run timed one by one.
    int timed_alone = 0;
    auto time_each = [&](const std::vector<size_t>& which, int runs) {
      std::vector<float> ms(which.size(), -1.0f);
      for (size_t first = 0; first < which.size(); first += kCandidatesAGraph) {
        const size_t end = std::min(which.size(), first + kCandidatesAGraph);
        std::vector<cublasLtMatmulAlgo_t> batch;
        for (size_t i = first; i < end; ++i) batch.push_back(candidates[which[i]]);
        std::vector<float> batch_ms = time_in_one_graph(capture, marks, batch, runs, lhs, rhs, out, bias);
        if (batch_ms.empty()) timed_alone += static_cast<int>(end - first);
        for (size_t i = first; i < end; ++i)
          ms[i] = batch_ms.empty() ? time(candidates[which[i]], runs) : batch_ms[i - first];
      }
      return ms;
    };
    const auto began = std::chrono::steady_clock::now();
    float first_ms = time(candidates[0], 4);
    // As many runs as fill some tens of microseconds, so that the gaps
    // between graph launches and the events' resolution stay small beside them.
    const int screening_runs = runs_filling(first_ms, kScreeningMs, kMaxScreeningRuns);
    const int final_runs = runs_filling(first_ms, kFinalMs, kMaxFinalRuns);
    if (first_ms >= 0 && first_ms < kMaxSearchMs)
      for (const cublasLtMatmulAlgo_t& config : configurations()) candidates.push_back(config);
    std::vector<size_t> every(candidates.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = i;
    AlgoChoice choice{candidates[0], 0, time_each(every, screening_runs), AlgoChoice::Source::Timed};
    std::vector<size_t> order;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (choice.candidate_ms[i] >= 0) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return choice.candidate_ms[a] < choice.candidate_ms[b]; });
    order.resize(std::min<size_t>(order.size(), kFinalists));
    const std::vector<float> final_ms = time_each(order, final_runs);
    float best_ms = std::numeric_limits<float>::infinity();
    for (size_t rank = 0; rank < order.size(); ++rank) {
      const size_t i = order[rank];
      const float ms = final_ms[rank];
      if (ms < 0) continue;
      choice.candidate_ms[i] = ms;
      if (ms < best_ms) best_ms = ms, choice.algo = candidates[i], choice.chosen = static_cast<int>(i);
    }
    d.cuStreamSynchronize(device_.stream);
    choice.search_ms = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - began).count();
    choice.timed_alone = timed_alone;
    for (CUevent mark : marks) d.cuEventDestroy(mark);
    d.cuEventDestroy(start);
    d.cuEventDestroy(stop);
    d.cuStreamDestroy(capture);
    d.cuMemFree(scratch);
    return std::isfinite(best_ms) ? choice : heuristic;
  }

  // `algos` timed in one graph: `runs` back-to-back runs of each, `marks`
  // recorded as the graph's own nodes before each one's runs and after the
  // last's, launched once to warm up and once timed; each one's mean,
  // negative where it cannot run the product. Empty where the graph could
  // not be captured, made or run. One graph instead of one a candidate,
  // each made and waited for: cold compiles on an H200 9% to 41% shorter in
  // five models of six (one run each). Some half a millisecond a candidate
  // is left, which is not the graphs'.
  std::vector<float> time_in_one_graph(CUstream stream, const std::vector<CUevent>& marks,
                                       const std::vector<cublasLtMatmulAlgo_t>& algos, int runs, CUdeviceptr lhs,
                                       CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr bias) {
    const Driver& d = device_.driver;
    std::vector<float> ms(algos.size(), -1.0f);
    std::vector<bool> ran(algos.size(), false);
    if (d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return {};
    bool recorded = d.cuEventRecordWithFlags(marks[0], stream, CU_EVENT_RECORD_EXTERNAL) == CUDA_SUCCESS;
    for (size_t i = 0; i < algos.size() && recorded; ++i) {
      algo_ = algos[i];
      try {
        for (int r = 0; r < runs; ++r) run(stream, lhs, rhs, out, bias);
        ran[i] = true;
      } catch (const std::runtime_error&) {  // this candidate cannot run the product
      }
      recorded = d.cuEventRecordWithFlags(marks[i + 1], stream, CU_EVENT_RECORD_EXTERNAL) == CUDA_SUCCESS;
    }
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    const bool captured = d.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && graph && recorded;
    if (captured && d.cuGraphInstantiateWithFlags(&exec, graph, 0) != CUDA_SUCCESS) exec = nullptr;
    if (graph) d.cuGraphDestroy(graph);
    if (!exec) return {};
    bool timed = d.cuGraphLaunch(exec, device_.stream) == CUDA_SUCCESS &&
                 d.cuGraphLaunch(exec, device_.stream) == CUDA_SUCCESS &&
                 d.cuEventSynchronize(marks[algos.size()]) == CUDA_SUCCESS;
    for (size_t i = 0; i < algos.size() && timed; ++i) {
      float elapsed = -1;
      timed = d.cuEventElapsedTime(&elapsed, marks[i], marks[i + 1]) == CUDA_SUCCESS;
      if (ran[i]) ms[i] = elapsed / static_cast<float>(runs);
    }
    d.cuGraphExecDestroy(exec);
    if (!timed) return {};
    return ms;
  }

  // `runs` runs of the product with the current algorithm captured on
  // `stream` as one graph; null where the algorithm cannot run it.
  CUgraphExec back_to_back(CUstream stream, CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr bias,
                           int runs) {
    const Driver& d = device_.driver;
    if (d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return nullptr;
    bool ran = true;
    try {
      for (int r = 0; r < runs; ++r) run(stream, lhs, rhs, out, bias);
    } catch (const std::runtime_error&) {  // this candidate cannot run the product
      ran = false;
    }
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    bool captured = d.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && graph;
    if (ran && captured && d.cuGraphInstantiateWithFlags(&exec, graph, 0) != CUDA_SUCCESS) exec = nullptr;
    if (graph) d.cuGraphDestroy(graph);
    return ran ? exec : nullptr;
  }

 public:
  ~Product() {
    const CublasLt& b = device_.blas;
    b.cublasLtMatrixLayoutDestroy(first_);
    b.cublasLtMatrixLayoutDestroy(second_);
    b.cublasLtMatrixLayoutDestroy(out_);
    b.cublasLtMatmulDescDestroy(desc_);
  }
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;

  void run(CUstream stream, CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr bias = 0) const {
    const float zero = 0.0f;
    if (bias_) {
      const void* pointer = reinterpret_cast<const void*>(bias);
      check(device_.blas.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                                        sizeof pointer),
            "cublasLtMatmulDescSetAttribute (bias)");
    }
    check(device_.blas.cublasLtMatmul(device_.lt, desc_, &alpha_, reinterpret_cast<const void*>(rhs), first_,
                                      reinterpret_cast<const void*>(lhs), second_, &zero, reinterpret_cast<void*>(out),
                                      out_, reinterpret_cast<void*>(out), out_, &algo_,
                                      reinterpret_cast<void*>(device_.workspace), kWorkspaceBytes, stream),
          "cublasLtMatmul");
  }
  const lazylab_contraction& contraction() const { return c_; }
  bool shared_lhs() const { return shared_lhs_; }
  uint32_t dtype() const { return dtype_; }
  const AlgoChoice& choice() const { return choice_; }
  bool adds_bias() const { return bias_; }
  bool applies_gelu() const { return epilogue_ == ProductEpilogue::kGeluBias; }

 private:
  cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t batch_stride) {
    cublasLtMatrixLayout_t l = nullptr;
    check(device_.blas.cublasLtMatrixLayoutCreate(&l, types_.data, rows, cols, rows), "cublasLtMatrixLayoutCreate");
    int32_t batch = static_cast<int32_t>(c_.batch);
    device_.blas.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    device_.blas.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                  sizeof batch_stride);
    return l;
  }

  const Device& device_;
  lazylab_contraction c_;
  uint32_t dtype_;
  ProductTypes types_{};
  ProductEpilogue epilogue_;
  bool bias_;
  float alpha_;
  bool shared_lhs_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, out_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  AlgoChoice choice_;
};

}  // namespace lazylab::cuda
