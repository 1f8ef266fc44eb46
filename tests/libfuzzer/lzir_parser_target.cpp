// libFuzzer target: the .lzir parser. Beyond "no crash", a text that parses
// must print and parse back to a structurally equal graph, and the verifier
// must answer (accept or refuse) without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/text_format.h"
#include "core/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = lazylab::parse_graph(text, "fuzz.lzir");
  if (!parsed) return 0;
  (void)lazylab::verify(parsed->graph);
  std::string printed = lazylab::print_graph(parsed->graph, parsed->name);
  auto reparsed = lazylab::parse_graph(printed, "printed.lzir");
  if (!reparsed || !lazylab::structurally_equal(parsed->graph, reparsed->graph)) __builtin_trap();
  return 0;
}
