// A backend whose buffers live in memory of its own that the host cannot
// read (like a GPU's), computing with the reference kernels. It counts every
// byte that crosses between the host and its buffers, so tests can pin that
// a loop of steps moves data to the device once and never back unless read.
// Counts: the exported counting_backend_stats().
#include <cstring>
#include <stdexcept>

#include "lazylab/backend_plugin.hpp"
#include "lazylab/reference/program_runner.h"

extern "C" struct CountingStats {
  uint64_t uploads, upload_bytes, downloads, download_bytes, executions, live_buffers;
  uint64_t executions_with_event, synchronizations;
};

namespace {

CountingStats stats{};

class DeviceMemory : public lazylab::plugin::Buffer {
 public:
  DeviceMemory(uint32_t dtype, std::vector<int64_t> shape) : Buffer(dtype, std::move(shape), 0), memory(bytes()) {
    ++stats.live_buffers;
  }
  ~DeviceMemory() override { --stats.live_buffers; }
  std::vector<std::byte> memory;  // host_data() stays nullptr: the host must ask to copy
};

class CountingExecutable : public lazylab::plugin::Executable {
 public:
  explicit CountingExecutable(const lazylab_program& program)
      : runner_(program),
        notes_("reference kernels: " + std::to_string(program.num_kernels) + "\nno candidates timed\n") {
    for (uint32_t i = 0; i < program.num_outputs; ++i) {
      const lazylab_value& value = program.values[program.outputs[i]];
      outputs_.push_back({value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank)});
    }
  }
  std::vector<std::unique_ptr<lazylab::plugin::Buffer>> execute(
      std::span<lazylab::plugin::Buffer* const> parameters, std::unique_ptr<lazylab::plugin::Event>* done,
      const lazylab::plugin::ExecuteOptions& options) override {
    std::vector<const void*> inputs;
    for (lazylab::plugin::Buffer* parameter : parameters)
      inputs.push_back(static_cast<DeviceMemory*>(parameter)->memory.data());
    std::vector<std::unique_ptr<lazylab::plugin::Buffer>> results;
    std::vector<void*> pointers;
    for (const auto& [dtype, shape] : outputs_) {
      auto buffer = std::make_unique<DeviceMemory>(dtype, shape);
      pointers.push_back(buffer->memory.data());
      results.push_back(std::move(buffer));
    }
    std::vector<double> kernel_ms;
    runner_.run(inputs.data(), pointers.data(), options.profile_kernels ? &kernel_ms : nullptr);
    ++stats.executions;
    stats.executions_with_event += done != nullptr;
    if (done) *done = std::make_unique<lazylab::plugin::CompletedEvent>(-1.0, std::move(kernel_ms));
    return results;
  }

  std::string notes() const override { return notes_; }

 private:
  lazylab::reference::ProgramRunner runner_;
  std::string notes_;
  std::vector<std::pair<uint32_t, std::vector<int64_t>>> outputs_;
};

class CountingBackend : public lazylab::plugin::Backend {
 public:
  explicit CountingBackend(const std::map<std::string, std::string>&) {}
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Parameter;
  }
  std::string device_description() const override { return "reference kernels on memory the host cannot read"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<CountingExecutable>(program);
  }
  std::unique_ptr<lazylab::plugin::Buffer> buffer_from_host(uint32_t dtype, std::vector<int64_t> shape, int32_t,
                                                            const void* data, bool) override {
    auto buffer = std::make_unique<DeviceMemory>(dtype, std::move(shape));
    std::memcpy(buffer->memory.data(), data, buffer->bytes());
    ++stats.uploads;
    stats.upload_bytes += buffer->bytes();
    return buffer;
  }
  void synchronize(int32_t) override { ++stats.synchronizations; }
  void buffer_to_host(lazylab::plugin::Buffer& buffer, void* destination) override {
    std::memcpy(destination, static_cast<DeviceMemory&>(buffer).memory.data(), buffer.bytes());
    ++stats.downloads;
    stats.download_bytes += buffer.bytes();
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) CountingStats* counting_backend_stats() { return &stats; }

LAZYLAB_DEFINE_BACKEND(CountingBackend, "counting", "reference kernels on private memory, counting transfers (tests)")
