// Optimizer steps as graph code (core/optimizers.h): SGD and AdamW against
// their formulas written out here in PyTorch's order (torch.optim's
// single-tensor steps), in f64 on the interpreter; one compiled step for
// every learning rate and step count; a training loop of grad() and
// adamw_step() updating its state in place on cpu and interp alike; and
// each bad input an error naming it.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "core/optimizers.h"
#include "support.h"

namespace lazylab::testing {
namespace {

using Values = std::vector<double>;

Values draw(size_t n, uint32_t seed, double low, double high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(low, high);
  Values v(n);
  for (double& x : v) x = u(rng);
  return v;
}

void check_near(const Values& got, const Values& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= 1e-13 * (1 + std::fabs(want[i])), "element " << i);
}

// A rank-0 input (not a constant of the graph, as Context::scalar makes).
template <class T>
Tensor input_scalar(Context& ctx, T value) {
  return ctx.from_vector<T>({value}, {});
}

struct AdamWCase {
  AdamWOptions options;
  double lr;
  double step;
};

}  // namespace

TEST_CASE("adamw_step is torch.optim.AdamW's update, bias correction and decoupled decay included") {
  const size_t n = 24;
  const Values p0 = draw(n, 1, -1, 1), g = draw(n, 2, -0.5, 0.5), m0 = draw(n, 3, -0.1, 0.1), v0 = draw(n, 4, 0, 0.05);
  for (AdamWCase c : {AdamWCase{{}, 1e-3, 1}, AdamWCase{{0.8, 0.99, 1e-6, 0.1}, 3e-2, 7},
                      AdamWCase{{0.9, 0.999, 1e-8, 0}, 1e-2, 1000}}) {
    CAPTURE(c.step);
    Session s;
    Tensor p = s.ctx.from_vector<double>(p0, {4, 6}), grad = s.ctx.from_vector<double>(g, {4, 6});
    Tensor m = s.ctx.from_vector<double>(m0, {4, 6}), v = s.ctx.from_vector<double>(v0, {4, 6});
    Tensor lr = s.ctx.scalar(c.lr, DType::F64), t = s.ctx.scalar(c.step, DType::F64);
    auto out = adamw_step({&p, 1}, {&grad, 1}, {&m, 1}, {&v, 1}, lr, t, c.options);
    REQUIRE(out.ok());
    Values want_p(n), want_m(n), want_v(n);
    const AdamWOptions& o = c.options;
    for (size_t i = 0; i < n; ++i) {
      double param = p0[i] * (1 - c.lr * o.weight_decay);
      want_m[i] = m0[i] * o.beta1 + g[i] * (1 - o.beta1);
      want_v[i] = v0[i] * o.beta2 + g[i] * g[i] * (1 - o.beta2);
      double step_size = c.lr / (1 - std::pow(o.beta1, c.step));
      double denominator = std::sqrt(want_v[i]) / std::sqrt(1 - std::pow(o.beta2, c.step)) + o.eps;
      want_p[i] = param - step_size * want_m[i] / denominator;
    }
    check_near(values<double>(out->params[0]), want_p);
    check_near(values<double>(out->m[0]), want_m);
    check_near(values<double>(out->v[0]), want_v);
  }
}

TEST_CASE("sgd_step is torch.optim.SGD's update: plain, with momentum, nesterov, weight decay") {
  const size_t n = 10;
  const Values p0 = draw(n, 5, -1, 1), g = draw(n, 6, -1, 1), b0 = draw(n, 7, -0.2, 0.2);
  for (SgdOptions o : {SgdOptions{}, SgdOptions{0.9, 0, false}, SgdOptions{0.9, 1e-2, true}, SgdOptions{0, 0.5}}) {
    CAPTURE(o.momentum);
    CAPTURE(o.nesterov);
    Session s;
    Tensor p = s.ctx.from_vector<double>(p0, {n}), grad = s.ctx.from_vector<double>(g, {n});
    Tensor buffer = s.ctx.from_vector<double>(b0, {n});
    std::span<const Tensor> buffers = o.momentum != 0 ? std::span<const Tensor>(&buffer, 1) : std::span<const Tensor>();
    auto out = sgd_step({&p, 1}, {&grad, 1}, buffers, s.ctx.scalar(0.1, DType::F64), o);
    REQUIRE(out.ok());
    Values want_p(n), want_b(n);
    for (size_t i = 0; i < n; ++i) {
      double d = g[i] + o.weight_decay * p0[i];
      if (o.momentum != 0) {
        want_b[i] = o.momentum * b0[i] + d;
        d = o.nesterov ? d + o.momentum * want_b[i] : want_b[i];
      }
      want_p[i] = p0[i] - 0.1 * d;
    }
    check_near(values<double>(out->params[0]), want_p);
    REQUIRE(out->momentum.size() == (o.momentum != 0 ? 1u : 0u));
    if (o.momentum != 0) check_near(values<double>(out->momentum[0]), want_b);
  }
}

TEST_CASE("an optimizer step compiles once for every learning rate and step count") {
  Session s;
  Values p0 = draw(8, 8, -1, 1), g = draw(8, 9, -1, 1);
  std::vector<Values> updated;
  for (double step = 1; step <= 3; ++step) {
    Tensor p = s.ctx.from_vector<double>(p0, {8}), grad = s.ctx.from_vector<double>(g, {8});
    Tensor m = full_like(p, 0), v = full_like(p, 0);
    REQUIRE(s.ctx.sync().ok());  // the state is an input of the step, not a constant of it
    auto out =
        adamw_step({&p, 1}, {&grad, 1}, {&m, 1}, {&v, 1}, input_scalar(s.ctx, 1e-3 * step), input_scalar(s.ctx, step));
    REQUIRE(out.ok());
    updated.push_back(values<double>(out->params[0]));
  }
  CHECK(updated[0] != updated[1]);
  CHECK(updated[1] != updated[2]);
  // The zeros' graph once, the step's once: the scalars are inputs. As
  // constants (Context::scalar) each value is a graph of its own.
  CHECK(s.engine.metrics().cache_misses == 2);
  Tensor p = s.ctx.from_vector<double>(p0, {8}), grad = s.ctx.from_vector<double>(g, {8});
  auto constant_rate = sgd_step({&p, 1}, {&grad, 1}, {}, s.ctx.scalar(0.5, DType::F64));
  REQUIRE(constant_rate.ok());
  REQUIRE(s.ctx.sync().ok());
  CHECK(s.engine.metrics().cache_misses == 3);
}

TEST_CASE("a loop of grad() and adamw_step() keeps its state on the backend and gives it up each step") {
  const int64_t batch = 8, d = 6, hidden = 12;
  auto train = [&](const std::string& backend_name, int steps, Metrics* metrics) {
    auto backend = load_backend(backend_name);
    REQUIRE(backend.ok());
    Engine engine(pipeline("decompose,canonicalize,cse,dce,fuse,lower,plan-memory"), **backend);
    Context ctx(engine);
    auto make = [&](Dims shape, uint32_t seed, double scale) {
      Values v = draw(static_cast<size_t>(TensorType{DType::F32, shape}.num_elements()), seed, -scale, scale);
      return ctx.from_vector<float>(std::vector<float>(v.begin(), v.end()), shape);
    };
    Tensor x = make({batch, d}, 11, 1), target = make({batch, d}, 12, 1);
    std::vector<Tensor> params = {make({d, hidden}, 13, 0.5), make({hidden}, 14, 0.1), make({hidden, d}, 15, 0.5)};
    std::vector<Tensor> m, v;
    for (const Tensor& p : params) {
      m.push_back(full_like(p, 0));
      v.push_back(full_like(p, 0));
    }
    std::vector<float> losses;
    for (int step = 1; step <= steps; ++step) {
      Tensor out = matmul(gelu(matmul(x, params[0]) + params[1]), params[2]);
      Tensor diff = out - target;
      Tensor loss = mean(diff * diff);
      auto grads = grad(loss, params);
      REQUIRE_MESSAGE(grads.ok(), (grads.ok() ? "" : grads.error().message));
      auto next = adamw_step(params, *grads, m, v, input_scalar(ctx, 1e-2f), input_scalar(ctx, float(step)));
      REQUIRE(next.ok());
      params = std::move(next->params);  // the old state's last handles go: its buffers are given up
      m = std::move(next->m);
      v = std::move(next->v);
      REQUIRE(ctx.sync().ok());
      losses.push_back(values(loss)[0]);
    }
    if (metrics) *metrics = engine.metrics();
    return std::make_pair(losses, values(params[0]));
  };
  Metrics cpu_metrics;
  auto [cpu_losses, cpu_w] = train("cpu", 6, &cpu_metrics);
  auto [interp_losses, interp_w] = train("interp", 6, nullptr);
  for (size_t i = 0; i < cpu_losses.size(); ++i)
    CHECK(cpu_losses[i] == doctest::Approx(interp_losses[i]).epsilon(1e-4));
  for (size_t i = 0; i < cpu_w.size(); ++i) CHECK(cpu_w[i] == doctest::Approx(interp_w[i]).epsilon(1e-4));
  CHECK(cpu_losses.back() < 0.8 * cpu_losses.front());  // AdamW at 1e-2 fits the target some
  // One step compiled, the zeros' graph before it; from the second step on
  // each parameter and moment is written over its old buffer (9 a step).
  CHECK(cpu_metrics.cache_misses == 2);
  CHECK(cpu_metrics.donated_buffers >= 9 * 4);
}

TEST_CASE("optimizer steps name what is wrong with their inputs") {
  Session s;
  Tensor p = s.ctx.from_vector<float>({1, 2, 3}, {3}), g = s.ctx.from_vector<float>({1, 1, 1}, {3});
  Tensor lr = s.ctx.scalar(0.1), t = s.ctx.scalar(1);
  auto error_of = [](const auto& result) { return result.ok() ? std::string("no error") : result.error().message; };
  Tensor g64 = s.ctx.from_vector<double>({1, 1, 1}, {3});
  CHECK(error_of(sgd_step({&p, 1}, {&g64, 1}, {}, lr)).find("gradient 0 is f64[3], its parameter f32[3]") !=
        std::string::npos);
  CHECK(error_of(sgd_step({&p, 1}, {}, {}, lr)).find("0 gradient for 1 parameters") != std::string::npos);
  Tensor lr_vector = s.ctx.from_vector<float>({0.1f}, {1});
  CHECK(error_of(sgd_step({&p, 1}, {&g, 1}, {}, lr_vector)).find("learning rate must be a float scalar") !=
        std::string::npos);
  CHECK(error_of(sgd_step({&p, 1}, {&g, 1}, {}, lr, {0, 0, true})).find("nesterov") != std::string::npos);
  CHECK(error_of(sgd_step({&p, 1}, {&g, 1}, {}, lr, {0.9})).find("momentum buffers") != std::string::npos);
  CHECK(error_of(sgd_step({&p, 1}, {&g, 1}, {&g, 1}, lr)).find("momentum 0") != std::string::npos);
  CHECK(error_of(adamw_step({&p, 1}, {&g, 1}, {&g, 1}, {&g, 1}, lr, t, {1.0})).find("beta1 must be in [0, 1)") !=
        std::string::npos);
  CHECK(error_of(adamw_step({&p, 1}, {&g, 1}, {&g, 1}, {}, lr, t)).find("second moments") != std::string::npos);
  Tensor step_int = s.ctx.scalar(1, DType::I32);
  CHECK(error_of(adamw_step({&p, 1}, {&g, 1}, {&g, 1}, {&g, 1}, lr, step_int)).find("step count") != std::string::npos);
  Tensor integer = s.ctx.from_vector<int32_t>({1, 2, 3}, {3});
  CHECK(error_of(sgd_step({&integer, 1}, {&integer, 1}, {}, lr)).find("not a float") != std::string::npos);
  CHECK(error_of(sgd_step({}, {}, {}, lr)).find("no parameters") != std::string::npos);
  Context other;
  Tensor foreign = other.from_vector<float>({1, 1, 1}, {3});
  CHECK(error_of(sgd_step({&p, 1}, {&foreign, 1}, {}, lr)).find("another context") != std::string::npos);
}

}  // namespace lazylab::testing
