// CUDA C++ to a CUBIN with NVRTC, for one GPU architecture, through a disk
// cache. An entry is addressed by the hash of the source, the NVRTC options,
// the architecture and the NVRTC and driver versions; it is written
// atomically (a temporary file, then rename) with a checksum, and one that is
// corrupt, truncated or stale is compiled again and replaced, never trusted.
#pragma once

#include <string>
#include <vector>

namespace lazylab::cuda {

struct CompilerOptions {
  std::string arch = "sm_90";  // the device's own: sm_<major><minor>
  bool disk_cache = true;
  std::string cache_dir;   // empty: $XDG_CACHE_HOME/lazylab/cuda, else ~/.cache/lazylab/cuda
  int driver_version = 0;  // part of the key: a new driver may load code differently
};

struct CompiledModule {
  std::string cubin;
  bool from_cache = false;
  std::string cache_note;  // why the cache was not used, when it was not
  double nvrtc_ms = 0;     // 0 on a cache hit
};

// The folder the cache uses under `options`.
std::string cache_directory(const CompilerOptions& options);

// Throws std::runtime_error on a compile failure, with NVRTC's log and the
// path where the source was saved.
CompiledModule compile_cuda(const std::string& source, const CompilerOptions& options);

// compile_cuda of each translation unit, the units compiled at once on the
// host's cores (NVRTC compiles separate programs concurrently); in their
// order. A failure throws the first unit's error, after every unit is done.
std::vector<CompiledModule> compile_units(const std::vector<std::string>& units, const CompilerOptions& options);

}  // namespace lazylab::cuda
