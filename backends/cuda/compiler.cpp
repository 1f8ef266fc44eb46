#include "compiler.h"

#include <fmt/format.h>
#include <oneapi/tbb/parallel_for.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "cuda_api.h"
#include "disk_cache.h"

namespace lazylab::cuda {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'Z', 'C', 'U', 'B', 'I', 'N', '1'};

std::vector<std::string> nvrtc_options(const CompilerOptions& options) {
  return {"--gpu-architecture=" + options.arch, "--std=c++17", "-default-device", "--extra-device-vectorization",
          "--split-compile=0"};
}

uint64_t cache_key(const std::string& source, const CompilerOptions& options, const Nvrtc& nvrtc) {
  std::string identity = source;
  for (const std::string& option : nvrtc_options(options)) identity += '\0' + option;
  identity += fmt::format("|nvrtc {}.{}|driver {}", nvrtc.major, nvrtc.minor, options.driver_version);
  return XXH3_64bits(identity.data(), identity.size());
}

std::string nvrtc_log(const Nvrtc& nvrtc, nvrtcProgram program) {
  size_t size = 0;
  nvrtc.nvrtcGetProgramLogSize(program, &size);
  std::string log(size, '\0');
  if (size) nvrtc.nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::string run_nvrtc(const Nvrtc& nvrtc, const std::string& source, const CompilerOptions& options, uint64_t key) {
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = nvrtc.nvrtcCreateProgram(&program, source.c_str(), "lazylab.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    throw std::runtime_error(std::string("NVRTC: cannot create a program: ") + nvrtc.nvrtcGetErrorString(r));
  std::vector<std::string> strings = nvrtc_options(options);
  std::vector<const char*> argv;
  for (const std::string& s : strings) argv.push_back(s.c_str());
  nvrtcResult result = nvrtc.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (result != NVRTC_SUCCESS) {
    std::string log = nvrtc_log(nvrtc, program);
    nvrtc.nvrtcDestroyProgram(&program);
    fs::path saved = fs::temp_directory_path() / fmt::format("lazylab-cuda-{:016x}.cu", key);
    std::ofstream(saved) << source;
    throw std::runtime_error(fmt::format("NVRTC could not compile the generated kernels ({}); source saved as {}:\n{}",
                                         nvrtc.nvrtcGetErrorString(result), saved.string(), log));
  }
  size_t size = 0;
  nvrtc.nvrtcGetCUBINSize(program, &size);
  std::string cubin(size, '\0');
  nvrtc.nvrtcGetCUBIN(program, cubin.data());
  nvrtc.nvrtcDestroyProgram(&program);
  return cubin;
}

}  // namespace

std::string cache_directory(const CompilerOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "lazylab" / "cuda").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "lazylab" / "cuda").string();
  return (fs::temp_directory_path() / "lazylab-cuda-cache").string();
}

CompiledModule compile_cuda(const std::string& source, const CompilerOptions& options) {
  std::string error;
  const Nvrtc* nvrtc = cuda::nvrtc(error);
  if (!nvrtc) throw std::runtime_error("cuda: " + error);
  uint64_t key = cache_key(source, options, *nvrtc);
  CompiledModule module;
  fs::path entry = fs::path(cache_directory(options)) / fmt::format("{:016x}.cubin", key);
  if (options.disk_cache) {
    module.cubin = read_cache_entry(entry.string(), kMagic, module.cache_note);
    if (module.cache_note.starts_with("corrupt")) module.cache_note += ", recompiled";
    if (!module.cubin.empty()) {
      module.from_cache = true;
      return module;
    }
  } else {
    module.cache_note = "disk cache off";
  }
  auto start = std::chrono::steady_clock::now();
  module.cubin = run_nvrtc(*nvrtc, source, options, key);
  module.nvrtc_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (options.disk_cache) write_cache_entry(entry.string(), kMagic, module.cubin);
  return module;
}

std::vector<CompiledModule> compile_units(const std::vector<std::string>& units, const CompilerOptions& options) {
  std::vector<CompiledModule> modules(units.size());
  std::vector<std::exception_ptr> errors(units.size());
  oneapi::tbb::parallel_for(size_t{0}, units.size(), [&](size_t i) {
    try {
      modules[i] = compile_cuda(units[i], options);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return modules;
}

}  // namespace lazylab::cuda
