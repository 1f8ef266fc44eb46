// libFuzzer target: the ONNX importer. Any bytes give a model or an error,
// never a crash; an imported model's graph passes the verifier (the
// importer builds only well-typed nodes) and its roots are the model's
// outputs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/verifier.h"
#include "onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  lazylab::OnnxImportOptions options;
  options.dims = {{"N", 2}, {"batch", 2}};
  auto model = lazylab::import_onnx_bytes(bytes, "fuzz.onnx", options);
  if (!model) return 0;
  if (!lazylab::verify(model->graph)) __builtin_trap();
  if (model->graph.roots().size() != model->outputs.size()) __builtin_trap();
  return 0;
}
