#include "output_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lazylab {
namespace {

double element(const Buffer& buffer, DType dtype, int64_t i) {
  return visit_dtype(dtype,
                     [&]<class T>(T) { return static_cast<double>(reinterpret_cast<const T*>(buffer.data())[i]); });
}

}  // namespace

Expected<ReferenceOutputs> read_outputs(const std::vector<Tensor>& tensors) {
  ReferenceOutputs outputs;
  for (const Tensor& tensor : tensors) {
    auto buffer = tensor.data();
    if (!buffer) return buffer.error();
    std::vector<double> values(tensor.type().num_elements());
    for (size_t i = 0; i < values.size(); ++i) values[i] = element(**buffer, tensor.dtype(), static_cast<int64_t>(i));
    outputs.types.push_back(tensor.type());
    outputs.values.push_back(std::move(values));
  }
  return outputs;
}

Tolerance tolerance_for(DType dtype, double rtol, double atol) {
  const dtypes::Row& row = dtypes::row(dtype_id(dtype));
  return {std::max(rtol, row.rtol), std::max(atol, row.atol)};
}

std::string dtype_tolerances(double rtol, double atol) {
  std::string note;
  for (DType dtype : kAllDTypes) {
    Tolerance t = tolerance_for(dtype, rtol, atol);
    if (t.rtol != rtol || t.atol != atol)
      note += fmt::format("; {} results: rtol {}, atol {}", dtype_name(dtype), t.rtol, t.atol);
  }
  return note;
}

std::string rtol_scope(const std::string& relative_to) {
  return relative_to == "output" ? ", rtol of each output's largest magnitude" : "";
}

// The comparison of output `o`'s elements, read through `get(i)`, with the
// reference's, folded into `c`.
template <class Get>
void compare_output(size_t o, DType dtype, Get get, const std::vector<double>& expected, double experiment_rtol,
                    double experiment_atol, bool relative_to_output, Correctness& c) {
  auto [rtol, atol] = tolerance_for(dtype, experiment_rtol, experiment_atol);
  double largest = 0;  // of the output's finite magnitudes
  for (double b : expected)
    if (std::isfinite(b)) largest = std::max(largest, std::fabs(b));
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = get(i), b = expected[i];
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same && c.pass)
        c = {false, c.max_abs_error, c.max_rel_error,
             fmt::format("output {} element {}: {} vs reference {}", o, i, a, b)};
      continue;
    }
    double abs_error = std::fabs(a - b);
    c.max_abs_error = std::max(c.max_abs_error, abs_error);
    c.max_rel_error = std::max(c.max_rel_error, abs_error / std::max(std::fabs(b), 1e-30));
    if (abs_error > atol + rtol * (relative_to_output ? largest : std::fabs(b)) && c.pass) {
      c.pass = false;
      c.problem = fmt::format("output {} element {}: {} vs reference {}", o, i, a, b);
    }
  }
}

// Reads each output where it is on the host, without copying it (outputs of
// the large GPU workloads are checked every step).
Expected<Correctness> compare_outputs(const std::vector<Tensor>& got, const ReferenceOutputs& want, double rtol,
                                      double atol, bool relative_to_output) {
  Correctness c;
  c.pass = true;
  std::vector<TensorType> types;
  for (const Tensor& t : got) types.push_back(t.type());
  if (types != want.types) return Correctness{false, 0, 0, "output types differ from the reference"};
  for (size_t o = 0; o < got.size(); ++o) {
    auto buffer = got[o].data();
    if (!buffer) return buffer.error();
    DType dtype = types[o].dtype;
    compare_output(
        o, dtype, [&](size_t i) { return element(**buffer, dtype, static_cast<int64_t>(i)); }, want.values[o], rtol,
        atol, relative_to_output, c);
  }
  return c;
}

Correctness compare_values(const ReferenceOutputs& got, const ReferenceOutputs& want, double rtol, double atol,
                           bool relative_to_output) {
  Correctness c;
  c.pass = true;
  if (got.types != want.types) return Correctness{false, 0, 0, "output types differ from the reference"};
  for (size_t o = 0; o < got.values.size(); ++o)
    compare_output(
        o, want.types[o].dtype, [&](size_t i) { return got.values[o][i]; }, want.values[o], rtol, atol,
        relative_to_output, c);
  return c;
}

void absorb(Correctness& total, const Correctness& step, int64_t index) {
  total.max_abs_error = std::max(total.max_abs_error, step.max_abs_error);
  total.max_rel_error = std::max(total.max_rel_error, step.max_rel_error);
  if (!step.pass && total.pass) {
    total.pass = false;
    total.problem = fmt::format("step {}: {}", index, step.problem);
  }
}

Status outputs_ok(const std::vector<Tensor>& outputs, const std::string& workload) {
  for (const Tensor& t : outputs)
    if (!t.ok()) return make_error(fmt::format("workload {}: {}", workload, t.error()->message));
  return {};
}

}  // namespace lazylab
