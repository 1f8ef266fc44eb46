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

struct Tolerance {
  double rtol = 0, atol = 0;
};

// What a result of `dtype` is checked with: the experiment's tolerance, or
// where larger the dtype's least (dtypes.def: a bf16 result is not held to
// f32's).
Tolerance tolerance_for(DType dtype, double rtol, double atol);
// The dtypes whose least tolerance is larger than the experiment's, with it,
// for a report: "; bf16 results: rtol 0.016, atol 1e-05; ..." ("" if none).
std::string dtype_tolerances(double rtol, double atol);
// For a report: what rtol is relative to, where not each element (the
// experiment's reference.relative_to): ", rtol of each output's largest
// magnitude", else "".
std::string rtol_scope(const std::string& relative_to);

// |a - b| <= atol + rtol * |b| with each output's tolerance_for; NaNs and
// infinities must match exactly. With `relative_to_output`, rtol is of the
// output's largest finite |b| instead of each element's: the norm-wise
// check for outputs whose small elements carry the rounding of large ones
// (a 16-bit network's logits).
Expected<Correctness> compare_outputs(const std::vector<Tensor>& got, const ReferenceOutputs& want, double rtol,
                                      double atol, bool relative_to_output = false);

// Two sets of outputs read to the host, compared the same way.
Correctness compare_values(const ReferenceOutputs& got, const ReferenceOutputs& want, double rtol, double atol,
                           bool relative_to_output = false);

// Folds one step's comparison into the cell's: the first failing step's
// problem, the largest errors of any step.
void absorb(Correctness& total, const Correctness& step, int64_t index);

// The first output that carries an error instead of a value.
Status outputs_ok(const std::vector<Tensor>& outputs, const std::string& workload);

}  // namespace lazylab
