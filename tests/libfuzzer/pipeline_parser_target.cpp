// libFuzzer target: the pass pipeline parser. A pipeline that parses must
// parse again from its canonical spelling, to the same canonical text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pipeline = lazylab::parse_pipeline(text);
  if (!pipeline) return 0;
  auto again = lazylab::parse_pipeline(pipeline->canonical);
  if (!again || again->canonical != pipeline->canonical || again->fingerprint != pipeline->fingerprint)
    __builtin_trap();
  return 0;
}
