// The CUDA tests' entry point. `--require=nvrtc` runs only where NVRTC can be
// opened (code generation and compilation: CI has the toolkit), and
// `--require=gpu` only where a CUDA device is usable; otherwise the run
// exits 77, which meson reports as skipped, saying why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <iostream>
#include <string>

#include "core/backend.h"
#include "cuda_api.h"

int main(int argc, char** argv) {
  std::string require;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--require=", 10) == 0) require = argv[i] + 10;
  std::string why;
  if (require == "nvrtc" && !lazylab::cuda::nvrtc(why)) {
    std::cout << "SKIP: " << why << "\n";
    return 77;
  }
  if (require == "gpu") {
    auto backend = lazylab::load_backend("cuda");
    if (!backend) {
      std::cout << "SKIP: " << backend.error().message << "\n";
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
