#include "optimizers.h"

#include <fmt/format.h>

#include <limits>

#include "tensor_ops.h"

namespace lazylab {
namespace {

Status check_tensor(const Tensor& x, const char* what, size_t i) {
  if (!x.ok()) return x.error() ? *x.error() : make_error(fmt::format("{} {}: an empty tensor", what, i));
  return {};
}

// `list` holds one tensor per parameter, each of its parameter's type.
Status check_like(std::span<const Tensor> params, std::span<const Tensor> list, const char* step, const char* what) {
  if (list.size() != params.size())
    return make_error(fmt::format("{}: {} {} for {} parameters", step, list.size(), what, params.size()));
  for (size_t i = 0; i < list.size(); ++i) {
    LAZYLAB_TRY(check_tensor(list[i], what, i));
    if (&list[i].context() != &params[i].context())
      return make_error(fmt::format("{}: {} {} belongs to another context than its parameter", step, what, i));
    if (list[i].type() != params[i].type())
      return make_error(fmt::format("{}: {} {} is {}, its parameter {}", step, what, i, to_string(list[i].type()),
                                    to_string(params[i].type())));
  }
  return {};
}

Status check_params(std::span<const Tensor> params, const char* step) {
  if (params.empty()) return make_error(fmt::format("{}: no parameters", step));
  for (size_t i = 0; i < params.size(); ++i) {
    LAZYLAB_TRY(check_tensor(params[i], "parameter", i));
    if (!is_float(params[i].dtype()))
      return make_error(fmt::format("{}: parameter {} is {}, not a float", step, i, to_string(params[i].type())));
  }
  return {};
}

// A rank-0 float tensor of the parameters' context (the learning rate, the step count).
Status check_scalar(const Tensor& x, std::span<const Tensor> params, const char* step, const char* what) {
  LAZYLAB_TRY(check_tensor(x, what, 0));
  if (x.rank() != 0 || !is_float(x.dtype()))
    return make_error(fmt::format("{}: {} must be a float scalar (rank 0), got {}", step, what, to_string(x.type())));
  if (&x.context() != &params[0].context())
    return make_error(fmt::format("{}: {} belongs to another context than the parameters", step, what));
  return {};
}

Status check_coefficient(double value, double low, bool low_open, double high, const char* step, const char* name) {
  bool ok = (low_open ? value > low : value >= low) && value < high;
  if (!ok)
    return make_error(
        fmt::format("{}: {} must be in {}{}, {}), got {}", step, name, low_open ? "(" : "[", low, high, value));
  return {};
}

// A scalar in the parameter's dtype, broadcast by the ops that read it.
Tensor as_dtype(const Tensor& scalar, const Tensor& param) {
  return scalar.dtype() == param.dtype() ? scalar : cast(scalar, param.dtype());
}

}  // namespace

Expected<SgdStep> sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<const Tensor> momentum, const Tensor& lr, const SgdOptions& options) {
  constexpr const char* kStep = "sgd_step";
  const double kHuge = std::numeric_limits<double>::infinity();
  LAZYLAB_TRY(check_params(params, kStep));
  LAZYLAB_TRY(check_like(params, grads, kStep, "gradient"));
  LAZYLAB_TRY(check_scalar(lr, params, kStep, "the learning rate"));
  LAZYLAB_TRY(check_coefficient(options.momentum, 0, false, kHuge, kStep, "momentum"));
  LAZYLAB_TRY(check_coefficient(options.weight_decay, 0, false, kHuge, kStep, "weight_decay"));
  if (options.nesterov && options.momentum == 0) return make_error("sgd_step: nesterov needs a momentum above 0");
  if (options.momentum != 0) LAZYLAB_TRY(check_like(params, momentum, kStep, "momentum buffers"));
  if (options.momentum == 0 && !momentum.empty())
    return make_error("sgd_step: momentum buffers given with momentum 0 (give none, or a momentum)");
  SgdStep out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor d = options.weight_decay != 0 ? grads[i] + p * options.weight_decay : grads[i];
    if (options.momentum != 0) {
      Tensor buffer = momentum[i] * options.momentum + d;
      d = options.nesterov ? d + buffer * options.momentum : buffer;
      out.momentum.push_back(buffer);
    }
    out.params.push_back(p - as_dtype(lr, p) * d);
  }
  return out;
}

Expected<AdamWStep> adamw_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> m,
                               std::span<const Tensor> v, const Tensor& lr, const Tensor& step,
                               const AdamWOptions& options) {
  constexpr const char* kStep = "adamw_step";
  const double kHuge = std::numeric_limits<double>::infinity();
  LAZYLAB_TRY(check_params(params, kStep));
  LAZYLAB_TRY(check_like(params, grads, kStep, "gradient"));
  LAZYLAB_TRY(check_like(params, m, kStep, "first moments (m)"));
  LAZYLAB_TRY(check_like(params, v, kStep, "second moments (v)"));
  LAZYLAB_TRY(check_scalar(lr, params, kStep, "the learning rate"));
  LAZYLAB_TRY(check_scalar(step, params, kStep, "the step count"));
  LAZYLAB_TRY(check_coefficient(options.beta1, 0, false, 1, kStep, "beta1"));
  LAZYLAB_TRY(check_coefficient(options.beta2, 0, false, 1, kStep, "beta2"));
  LAZYLAB_TRY(check_coefficient(options.eps, 0, false, kHuge, kStep, "eps"));
  LAZYLAB_TRY(check_coefficient(options.weight_decay, 0, false, kHuge, kStep, "weight_decay"));
  AdamWStep out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor& g = grads[i];
    Tensor rate = as_dtype(lr, p), t = as_dtype(step, p);
    Tensor decayed = options.weight_decay != 0 ? p * (1.0 - rate * options.weight_decay) : p;
    Tensor m1 = m[i] * options.beta1 + g * (1 - options.beta1);
    Tensor v1 = v[i] * options.beta2 + g * g * (1 - options.beta2);
    Tensor correction1 = 1.0 - pow(full_like(t, options.beta1), t);
    Tensor correction2 = 1.0 - pow(full_like(t, options.beta2), t);
    Tensor denominator = sqrt(v1) / sqrt(correction2) + options.eps;
    out.params.push_back(decayed - rate / correction1 * (m1 / denominator));
    out.m.push_back(m1);
    out.v.push_back(v1);
  }
  return out;
}

}  // namespace lazylab
