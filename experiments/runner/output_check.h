// A cell's outputs checked against the reference backend's, numpy.allclose
// style, step by step.
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "core/tensor.h"

namespace lazylab {

struct Correctness {
  bool pass = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string problem;  // first mismatch, shape or dtype difference
};

// The reference's outputs, read to the host once.
struct ReferenceOutputs {
  std::vector<TensorType> types;
  std::vector<std::vector<double>> values;
};

Expected<ReferenceOutputs> read_outputs(const std::vector<Tensor>& tensors);

// |a - b| <= atol + rtol * |b|; NaNs and infinities must match exactly.
Expected<Correctness> compare_outputs(const std::vector<Tensor>& got, const ReferenceOutputs& want, double rtol,
                                      double atol);

// Two sets of outputs read to the host, compared the same way.
Correctness compare_values(const ReferenceOutputs& got, const ReferenceOutputs& want, double rtol, double atol);

// Folds one step's comparison into the cell's: the first failing step's
// problem, the largest errors of any step.
void absorb(Correctness& total, const Correctness& step, int64_t index);

// The first output that carries an error instead of a value.
Status outputs_ok(const std::vector<Tensor>& outputs, const std::string& workload);

}  // namespace lazylab
