// A program outside lazylab's tree: it traces a two-layer MLP with the lazy
// Tensor API, runs it on the cpu backend through an eager pipeline and a
// fused one, reads both results back and checks that they agree.
//   g++ -std=c++20 mlp.cpp $(pkg-config --cflags --libs lazylab) -o mlp
#include <lazylab/lazylab.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace ll = lazylab;

namespace {

constexpr int64_t kBatch = 4, kIn = 8, kHidden = 16, kOut = 3;

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 7) - 3);
  return v;
}

// y = relu(x W1 + b1) W2 + b2, traced: nothing runs until the read.
ll::Expected<std::vector<float>> run_mlp(const std::string& pipeline_text, ll::Backend& backend) {
  auto pipeline = ll::parse_pipeline(pipeline_text);
  if (!pipeline) return pipeline.error();
  ll::Engine engine(std::move(*pipeline), backend);
  ll::Context ctx(engine);
  ll::Tensor x = ctx.from_vector(ramp(kBatch * kIn, 0.25f), {kBatch, kIn});
  ll::Tensor w1 = ctx.from_vector(ramp(kIn * kHidden, 0.1f), {kIn, kHidden});
  ll::Tensor b1 = ctx.from_vector(ramp(kHidden, 0.05f), {kHidden});
  ll::Tensor w2 = ctx.from_vector(ramp(kHidden * kOut, 0.2f), {kHidden, kOut});
  ll::Tensor b2 = ctx.from_vector(ramp(kOut, 0.5f), {kOut});
  ll::Tensor y = ll::matmul(ll::relu(ll::matmul(x, w1) + b1), w2) + b2;
  auto values = y.to_vector<float>();
  if (auto compiled = engine.last_compiled())
    std::printf("%zu kernels, compiled in %.2f ms: %s\n", compiled->num_kernels, compiled->compile_ms,
                pipeline_text.c_str());
  return values;
}

}  // namespace

int main() {
  std::printf("%s\n", ll::build_description().c_str());
  auto backend = ll::load_backend("cpu");
  if (!backend) {
    std::fprintf(stderr, "mlp: %s\n", backend.error().message.c_str());
    return 1;
  }
  auto eager = run_mlp("decompose,fuse{strategy=none},lower", **backend);
  auto fused = run_mlp("canonicalize,cse,decompose,dce,fuse{strategy=gemm-epilogue},lower,plan-memory", **backend);
  for (const auto* result : {&eager, &fused})
    if (!*result) {
      std::fprintf(stderr, "mlp: %s\n", result->error().message.c_str());
      return 1;
    }
  double worst = 0;
  for (size_t i = 0; i < eager->size(); ++i) worst = std::max(worst, std::fabs(double((*eager)[i]) - (*fused)[i]));
  std::printf("y[0] = [%g, %g, %g]; eager vs fused: largest difference %g\n", (*fused)[0], (*fused)[1], (*fused)[2],
              worst);
  return worst <= 1e-4 ? 0 : 1;
}
