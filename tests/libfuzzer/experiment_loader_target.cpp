// libFuzzer target: the experiment loader (YAML, keys, sweeps, pipelines,
// overrides). Any text gets an experiment or an error value, never a crash,
// an abort or an exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/experiment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)lazylab::parse_experiment(text, "fuzz/experiment.yaml");
  return 0;
}
