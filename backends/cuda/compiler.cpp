#include "compiler.h"

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "cuda_api.h"

namespace lazylab::cuda {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'Z', 'C', 'U', 'B', 'I', 'N', '1'};

// An entry: magic, payload size, payload checksum, payload.
struct Header {
  char magic[8];
  uint64_t size;
  uint64_t checksum;
};

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

// The payload of a sound entry, or empty with `why` when there is none.
std::string read_entry(const fs::path& path, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "not cached";
    return "";
  }
  Header header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (!in || std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
    why = "corrupt cache entry (bad header), recompiled";
    return "";
  }
  std::string payload(header.size, '\0');
  in.read(payload.data(), static_cast<std::streamsize>(payload.size()));
  if (!in || in.peek() != std::char_traits<char>::eof()) {
    why = "corrupt cache entry (wrong length), recompiled";
    return "";
  }
  if (XXH3_64bits(payload.data(), payload.size()) != header.checksum) {
    why = "corrupt cache entry (checksum), recompiled";
    return "";
  }
  return payload;
}

// Temporary file, then rename: a reader sees the old entry or the new one.
void write_entry(const fs::path& path, const std::string& payload) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  fs::path temporary = path;
  temporary += fmt::format(".tmp.{}", getpid());
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.size = payload.size();
  header.checksum = XXH3_64bits(payload.data(), payload.size());
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out.flush()) {
      fs::remove(temporary, ec);
      return;  // an unwritable cache costs a recompile next time, nothing else
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) fs::remove(temporary, ec);
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
    module.cubin = read_entry(entry, module.cache_note);
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
  if (options.disk_cache) write_entry(entry, module.cubin);
  return module;
}

}  // namespace lazylab::cuda
