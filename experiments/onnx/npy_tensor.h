// Tensors as NumPy .npy files (through xtensor's xnpy, Debian's
// libxtensor-dev): how `lazylab import` writes a model's weights and how a
// .lzir workload binds them, in a format NumPy reads.
#pragma once

#include <string>

#include "onnx/onnx_import.h"

namespace lazylab {

Status write_npy(const std::string& path, const NamedTensor& tensor);
// The array at `path`, which must be of a dtype lazylab has (f32, f64, i32,
// i64, bool), C order.
Expected<NamedTensor> read_npy(const std::string& path);

}  // namespace lazylab
