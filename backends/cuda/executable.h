// A compiled Program on one GPU: its device arena, its generated kernels
// loaded from the module, its cuBLASLt products, and a step queued on the
// stream (or replayed as a CUDA graph). Included by backend.cpp.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

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
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "codegen.h"
#include "compiler.h"
#include "device_buffer.h"
#include "lazylab/op_table.hpp"
#include "product.h"

namespace lazylab::cuda {

struct Value {
  uint32_t dtype;
  std::vector<int64_t> shape;
  uint32_t kind;
  int64_t ordinal;
  uint64_t offset;
  uint64_t bytes;
  bool staged = false;    // a parameter or output at a fixed address, for graph replay
  bool in_place = false;  // a parameter a replay reads where it lies, at the address captured
  CUdeviceptr captured = 0;
  uint64_t stage_offset = 0;
  uint64_t staged_serial = 0;  // the parameter buffer whose contents are staged now (serials start at 1)
};

struct LoadedLaunch {
  CUfunction function;
  Launch launch;
  uint32_t grid;
};

struct LoadedKernel {
  std::unique_ptr<Product> product;
  uint32_t product_out = kNoValue, bias = kNoValue;
  std::vector<LoadedLaunch> launches;
  size_t launches_before_product = 0;
};

class CudaExecutable : public plugin::Executable {
 public:
  CudaExecutable(Device& device, int32_t index, const lazylab_program& program, const CodegenOptions& codegen,
                 const CompilerOptions& compiler, bool tf32, GraphPolicy graph)
      : device_(device), index_(index), outputs_(program.outputs, program.outputs + program.num_outputs) {
    const int32_t* donors = lazylab_program_donors(&program);
    for (uint32_t i = 0; i < program.num_outputs; ++i) donors_.push_back(donors ? donors[i] : -1);
    parameters_.assign(program.parameters, program.parameters + program.num_parameters);
    for (uint32_t v = 0; v < program.num_values; ++v) {
      const lazylab_value& value = program.values[v];
      values_.push_back({value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank), value.kind,
                         value.ordinal, value.offset, value.bytes});
    }
    ProgramCode code = generate(program, codegen);
    place_local_values(program.arena_bytes, code.needs_memory);
    place_columns(code.columns_bytes);
    size_t launches = 0;
    for (const KernelCode& kernel : code.kernels) launches += kernel.launches.size() + (kernel.product ? 1 : 0);
    if (graph.replays(launches, choose_in_place_parameters())) {
      place_staged_values();
    } else {
      for (Value& value : values_) value.in_place = false;
    }
    device.bind();
    if (arena_bytes_) check(device.driver, device.driver.cuMemAlloc(&arena_, arena_bytes_), "cuMemAlloc (arena)");
    auto start = std::chrono::steady_clock::now();
    std::vector<CompiledModule> units = compile_units(code.units, compiler);
    double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const CompiledModule& unit : units) {
      check(device.driver, device.driver.cuModuleLoadData(&modules_.emplace_back(), unit.cubin.data()),
            "cuModuleLoadData");
    }
    for (uint32_t k = 0; k < program.num_kernels; ++k) kernels_.push_back(load(code.kernels[k], compiler, tf32));
    notes_ = compile_notes(units, compile_ms);
    if (code.kernels_sharing_functions)
      notes_ += fmt::format("{} of {} kernels launch another kernel's functions (the same code for other values)\n",
                            code.kernels_sharing_functions, code.kernels.size());
    for (uint32_t k = 0; k < program.num_kernels; ++k) {
      if (!code.kernels[k].op_by_op.empty())
        notes_ += fmt::format("kernel {} ({}): op by op: {}\n", k, lazylab_kernel_kind_name(program.kernels[k].kind),
                              code.kernels[k].op_by_op);
      if (!code.kernels[k].slower_path.empty())
        notes_ += fmt::format("kernel {} ({}): {}\n", k, lazylab_kernel_kind_name(program.kernels[k].kind),
                              code.kernels[k].slower_path);
    }
  }

  std::string notes() const override { return notes_; }
  ~CudaExecutable() override {
    device_.bind();
    device_.driver.cuStreamSynchronize(device_.stream);
    if (graph_exec_) device_.driver.cuGraphExecDestroy(graph_exec_);
    if (graph_) device_.driver.cuGraphDestroy(graph_);
    kernels_.clear();
    for (CUmodule module : modules_)
      if (module) device_.driver.cuModuleUnload(module);
    if (arena_) device_.driver.cuMemFree(arena_);
  }

  std::vector<std::unique_ptr<plugin::Buffer>> execute(std::span<plugin::Buffer* const> parameters,
                                                       std::unique_ptr<plugin::Event>* done,
                                                       const plugin::ExecuteOptions& options) override {
    const Driver& d = device_.driver;
    device_.bind();
    // Per-kernel times need marks between the launches: those steps launch
    // one by one.
    bool replay = staged_ && !options.profile_kernels && in_place_still(parameters);
    std::vector<int32_t> donor = choose_donors(parameters, options);
    std::vector<std::unique_ptr<plugin::Buffer>> outputs(outputs_.size());
    std::vector<CUdeviceptr> output_pointers(outputs_.size(), 0);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (donor[i] >= 0) {  // written into its donor's memory, which it takes once the launches are queued
        output_pointers[i] = static_cast<DeviceBuffer*>(parameters[donor[i]])->pointer();
        continue;
      }
      const Value& root = values_[outputs_[i]];
      auto buffer = std::make_unique<DeviceBuffer>(device_, root.dtype, root.shape, index_);
      output_pointers[i] = buffer->pointer();
      outputs[i] = std::move(buffer);
    }
    auto address = [&](uint32_t v) -> CUdeviceptr {
      const Value& value = values_[v];
      if (replay && value.staged) return arena_ + value.stage_offset;
      switch (value.kind) {
        case LAZYLAB_VALUE_PARAMETER: return static_cast<DeviceBuffer*>(parameters[value.ordinal])->pointer();
        case LAZYLAB_VALUE_OUTPUT: return output_pointers[value.ordinal];
        default: return arena_ + value.offset;
      }
    };
    std::unique_ptr<ExecutionEvent> event;
    if (done) {
      event = std::make_unique<ExecutionEvent>(device_, options.profile_kernels, kernels_.size());
      event->record_start();
    }
    if (replay) {
      for (Value& value : values_) {
        if (!value.staged || value.kind != LAZYLAB_VALUE_PARAMETER || !value.bytes) continue;
        auto* parameter = static_cast<DeviceBuffer*>(parameters[value.ordinal]);
        if (value.staged_serial == parameter->serial()) continue;  // staged last step, unchanged since
        check(d, d.cuMemcpyDtoDAsync(arena_ + value.stage_offset, parameter->pointer(), value.bytes, device_.stream),
              "cuMemcpyDtoDAsync (staging a parameter)");
        value.staged_serial = parameter->serial();
      }
      if (!graph_exec_) {
        for (uint32_t v = 0; v < values_.size(); ++v)
          if (values_[v].in_place) values_[v].captured = address(v);
        capture(address);
      }
      check(d, d.cuGraphLaunch(graph_exec_, device_.stream), "cuGraphLaunch");
    } else {
      for (size_t k = 0; k < kernels_.size(); ++k) {
        if (event) event->record_kernel_start(k);
        run(kernels_[k], address, device_.stream);
      }
    }
    if (event) event->record_kernel_start(kernels_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) {  // roots not written in place, and staged ones
      const Value& value = values_[outputs_[i]];
      bool in_place = value.kind == LAZYLAB_VALUE_OUTPUT && value.ordinal == static_cast<int64_t>(i);
      if ((!in_place || replay) && value.bytes)
        check(d, d.cuMemcpyDtoDAsync(output_pointers[i], address(outputs_[i]), value.bytes, device_.stream),
              "cuMemcpyDtoDAsync");
    }
    take_donated(parameters, donor, outputs);
    if (event) {
      event->record_stop();
      *done = std::move(event);
    }
    return outputs;
  }

 private:
  // Buffer donation (ABI 3.8). Per output, the parameter whose memory it
  // takes (marked taken for the host), or -1: given up by the host, this backend's own, of the output's
  // size, not taken by another output. The host's plan makes it safe: the
  // parameter's readers run in earlier kernels (stream order), or in the
  // output's own elementwise kernel, element for element, whose pointers
  // are then not __restrict__ (codegen.cpp). In graph replay the kernels
  // write staging and the copy out lands in the taken memory.
  std::vector<int32_t> choose_donors(std::span<plugin::Buffer* const> parameters,
                                     const plugin::ExecuteOptions& options) const {
    std::vector<int32_t> donor(outputs_.size(), -1);
    if (options.donated.size() != parameters.size() || options.taken.size() != parameters.size()) return donor;
    std::vector<bool> claimed(parameters.size(), false);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      int32_t p = donors_[i];
      if (p < 0 || static_cast<size_t>(p) >= parameters.size() || !options.donated[p] || options.taken[p] || claimed[p])
        continue;
      auto* buffer = dynamic_cast<DeviceBuffer*>(parameters[p]);
      if (!buffer || !buffer->pointer() || buffer->bytes() != values_[outputs_[i]].bytes) continue;
      claimed[p] = true;
      donor[i] = p;
      options.taken[p] = 1;
    }
    return donor;
  }

  // Once everything reading the parameters is queued, each taken memory
  // passes to its output's buffer.
  void take_donated(std::span<plugin::Buffer* const> parameters, const std::vector<int32_t>& donor,
                    std::vector<std::unique_ptr<plugin::Buffer>>& outputs) {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (donor[i] < 0) continue;
      auto* parameter = static_cast<DeviceBuffer*>(parameters[donor[i]]);
      values_[parameters_[donor[i]]].staged_serial = 0;  // its memory now holds the output
      const Value& root = values_[outputs_[i]];
      outputs[i] = std::make_unique<DeviceBuffer>(device_, root.dtype, root.shape, index_, parameter->release());
    }
  }

  // Whether the parameters a replay reads in place are where the graph was
  // captured (or none is captured yet). One that moved means capturing
  // again; moves on kMovesBeforeGivingUp steps running end replay for good.
  bool in_place_still(std::span<plugin::Buffer* const> parameters) {
    if (!graph_exec_) return true;
    bool moved = false;
    for (const Value& value : values_)
      if (value.in_place && static_cast<DeviceBuffer*>(parameters[value.ordinal])->pointer() != value.captured)
        moved = true;
    if (!moved) {
      moves_running_ = 0;
      return true;
    }
    const Driver& d = device_.driver;
    check(d, d.cuGraphExecDestroy(graph_exec_), "cuGraphExecDestroy");
    check(d, d.cuGraphDestroy(graph_), "cuGraphDestroy");
    graph_exec_ = nullptr;
    graph_ = nullptr;
    if (++moves_running_ < GraphPolicy::kMovesBeforeGivingUp) return true;
    staged_ = false;  // parameters that move every step: launches one by one
    return false;
  }

  // The launches recorded once into a graph, at the staged addresses.
  template <class Address>
  void capture(Address& address) {
    const Driver& d = device_.driver;
    CUstream stream = device_.capture_stream;
    check(d, d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    try {
      for (const LoadedKernel& kernel : kernels_) run(kernel, address, stream);
    } catch (...) {
      CUgraph partial = nullptr;
      d.cuStreamEndCapture(stream, &partial);
      if (partial) d.cuGraphDestroy(partial);
      throw;
    }
    check(d, d.cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture");
    check(d, d.cuGraphInstantiateWithFlags(&graph_exec_, graph_, 0), "cuGraphInstantiateWithFlags");
  }

  // How the generated code was had, and each product's cuBLASLt choice.
  std::string compile_notes(const std::vector<CompiledModule>& units, double compile_ms) const {
    size_t cached = 0;
    double nvrtc_ms = 0;
    std::set<std::string> why_compiled;
    for (const CompiledModule& unit : units) {
      cached += unit.from_cache;
      nvrtc_ms += unit.nvrtc_ms;
      if (!unit.from_cache && !unit.cache_note.empty()) why_compiled.insert(unit.cache_note);
    }
    std::string notes =
        units.empty() ? "generated kernels: none\n"
        : cached == units.size()
            ? "generated kernels: from the disk cache\n"
            : fmt::format(
                  "generated kernels: NVRTC, {:.0f} ms for {} of {} translation units at "
                  "once ({:.0f} ms of NVRTC's, added up; {})\n",
                  compile_ms, units.size() - cached, units.size(), nvrtc_ms, fmt::join(why_compiled, "; "));
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const Product* product = kernels_[k].product.get();
      if (!product) continue;
      const lazylab_contraction& c = product->contraction();
      notes += fmt::format("kernel {}: cuBLASLt {} {} x [{} x {}] x [{} x {}]{}: {}\n", k,
                           dtypes::name(product->dtype()), c.batch, c.m, c.k, c.k, c.n,
                           product->applies_gelu() ? " + bias, gelu (GELU_BIAS epilogue, on the f32 sums)"
                           : product->adds_bias()  ? " + bias"
                                                   : "",
                           describe(product->choice()));
    }
    return notes;
  }

  // For graphs: which parameters a replay stages (the smallest, up to
  // GraphPolicy::kStagedParameterBytes in all) and which it reads in place;
  // the bytes it copies a step at most (those parameters and the outputs).
  uint64_t choose_in_place_parameters() {
    std::vector<uint32_t> by_size;
    for (uint32_t v = 0; v < values_.size(); ++v)
      if (values_[v].kind == LAZYLAB_VALUE_PARAMETER) by_size.push_back(v);
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](uint32_t a, uint32_t b) { return values_[a].bytes < values_[b].bytes; });
    uint64_t parameter_bytes = 0, staged = 0;
    for (uint32_t v : by_size) {
      parameter_bytes += values_[v].bytes;
      values_[v].in_place = parameter_bytes > GraphPolicy::kStagedParameterBytes;
      if (!values_[v].in_place) staged += values_[v].bytes;
    }
    for (const Value& value : values_)
      if (value.kind == LAZYLAB_VALUE_OUTPUT) staged += value.bytes;
    return staged;
  }

  // Staged parameters and outputs get fixed addresses after the arena.
  void place_staged_values() {
    for (Value& value : values_) {
      if ((value.kind != LAZYLAB_VALUE_PARAMETER && value.kind != LAZYLAB_VALUE_OUTPUT) || value.in_place) continue;
      arena_bytes_ = (arena_bytes_ + 255) / 256 * 256;
      value.staged = true;
      value.stage_offset = arena_bytes_;
      arena_bytes_ += value.bytes;
    }
    staged_ = true;
  }

  // Kernel-local values the generated code keeps in memory go after the
  // memory plan's arena.
  void place_local_values(uint64_t arena_bytes, const std::vector<uint32_t>& locals) {
    arena_bytes_ = arena_bytes;
    for (uint32_t v : locals) {
      arena_bytes_ = (arena_bytes_ + 255) / 256 * 256;
      values_[v].kind = LAZYLAB_VALUE_ARENA;
      values_[v].offset = arena_bytes_;
      arena_bytes_ += values_[v].bytes;
    }
  }

  // The convolutions' unfolded windows: one more value (id num_values, as
  // codegen.h says), after the arena and the local values.
  void place_columns(uint64_t bytes) {
    if (!bytes) return;
    arena_bytes_ = (arena_bytes_ + 255) / 256 * 256;
    values_.push_back({LAZYLAB_U8, {static_cast<int64_t>(bytes)}, LAZYLAB_VALUE_ARENA, -1, arena_bytes_, bytes});
    arena_bytes_ += bytes;
  }

  static ProductEpilogue epilogue_of(const KernelCode& code) {
    if (code.bias == kNoValue) return ProductEpilogue::kNone;
    return code.gelu ? ProductEpilogue::kGeluBias : ProductEpilogue::kBias;
  }

  LoadedKernel load(const KernelCode& code, const CompilerOptions& compiler, bool tf32) {
    LoadedKernel loaded;
    if (code.product)
      loaded.product =
          std::make_unique<Product>(device_, compiler, code.contraction, values_[code.contraction.matmul].dtype, tf32,
                                    epilogue_of(code), static_cast<float>(code.alpha), code.shared_lhs);
    loaded.launches_before_product = code.launches_before_product;
    loaded.product_out = code.product_out;
    loaded.bias = code.bias;
    for (const Launch& launch : code.launches) {
      CUfunction function = nullptr;
      check(device_.driver,
            device_.driver.cuModuleGetFunction(&function, modules_.at(code.unit), launch.function.c_str()),
            "cuModuleGetFunction");
      if (launch.shared_bytes > 48 * 1024)  // past the default, asked for explicitly
        check(device_.driver,
              device_.driver.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(launch.shared_bytes)),
              "cuFuncSetAttribute");
      if (launch.registers) {
        int registers = 0;
        check(device_.driver, device_.driver.cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function),
              "cuFuncGetAttribute");
        if (registers < static_cast<int>(launch.registers))
          throw std::runtime_error(
              fmt::format("{} was compiled to {} registers a thread, not the {} its warpgroups share out",
                          launch.function, registers, launch.registers));
      }
      // Grid-stride loops: enough blocks to fill the device, no more.
      uint64_t blocks = launch.block_per_item ? (launch.work + launch.items_per_block - 1) / launch.items_per_block
                                              : (launch.work + launch.block - 1) / launch.block;
      uint64_t limit = launch.block_per_item ? uint64_t{1} << 30 : static_cast<uint64_t>(device_.sm_count) * 32;
      uint32_t grid = launch.blocks ? launch.blocks : static_cast<uint32_t>(std::min(blocks, limit));
      loaded.launches.push_back({function, launch, grid});
    }
    return loaded;
  }

  template <class Address>
  void run(const LoadedKernel& kernel, Address& address, CUstream stream) {
    for (size_t i = 0; i <= kernel.launches.size(); ++i) {
      if (kernel.product && i == kernel.launches_before_product) {
        const lazylab_contraction& c = kernel.product->contraction();
        kernel.product->run(stream, address(c.lhs), address(c.rhs), address(kernel.product_out),
                            kernel.bias == kNoValue ? 0 : address(kernel.bias));
      }
      if (i < kernel.launches.size()) launch(kernel.launches[i], address, stream);
    }
  }

  template <class Address>
  void launch(const LoadedLaunch& l, Address& address, CUstream stream) {
    if (l.launch.work == 0) return;
    std::vector<CUdeviceptr> pointers;
    for (uint32_t v : l.launch.values) pointers.push_back(v == kScratchValue ? device_.workspace : address(v));
    long long work = l.launch.work;
    std::vector<void*> args;
    for (CUdeviceptr& p : pointers) args.push_back(&p);
    args.push_back(&work);
    check(device_.driver,
          device_.driver.cuLaunchKernel(l.function, l.grid, l.launch.blocks_y, 1, l.launch.block, 1, 1,
                                        l.launch.shared_bytes, stream, args.data(), nullptr),
          "cuLaunchKernel");
  }

  Device& device_;
  int32_t index_;
  std::vector<Value> values_;
  std::vector<uint32_t> outputs_;
  std::vector<uint32_t> parameters_;  // value ids, by ordinal
  std::vector<int32_t> donors_;       // per output: lazylab_program's output_donors, or -1
  uint64_t arena_bytes_ = 0;
  CUdeviceptr arena_ = 0;
  std::vector<CUmodule> modules_;  // by translation unit
  std::vector<LoadedKernel> kernels_;
  std::string notes_;      // compile_notes()
  bool staged_ = false;    // replayed as a graph (unless a step's kernels are profiled)
  int moves_running_ = 0;  // steps running on which an in-place parameter had moved
  CUgraph graph_ = nullptr;
  CUgraphExec graph_exec_ = nullptr;
};

}  // namespace lazylab::cuda
