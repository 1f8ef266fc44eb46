// Data stays in the backend's buffers between steps: a loop of steps whose
// state feeds the next moves no bytes to or from the host after the first
// step, and a host read copies only the tensor read. Pinned with a backend
// whose memory the host cannot read, counting every byte that crosses.
#include <dlfcn.h>

#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

struct CountingStats {
  uint64_t uploads, upload_bytes, downloads, download_bytes, executions, live_buffers;
  uint64_t executions_with_event, synchronizations;
};

const std::string kCounting = testing::test_backend_plugin("counting");

CountingStats& stats() {
  void* library = dlopen(kCounting.c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library);
  void* symbol = dlsym(library, "counting_backend_stats");
  dlclose(library);
  REQUIRE(symbol);
  return *reinterpret_cast<CountingStats* (*)()>(symbol)();
}

// A training-loop shape: state x and a weight w, x = tanh(x * w + 0.5).
std::vector<float> train(Context& ctx, int steps, CountingStats* counts, Metrics* metrics) {
  std::vector<float> start = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};
  Tensor x = ctx.from_vector(start, {8});
  Tensor w = ctx.from_vector(std::vector<float>(8, 1.5f), {8});
  for (int step = 0; step < steps; ++step) {
    x = tanh(x * w + 0.5);
    REQUIRE(ctx.mark_step().ok());
    if (counts && step == 0) {
      CHECK(counts->uploads == 2);  // x and w, once
      CHECK(counts->upload_bytes == 2 * 8 * sizeof(float));
    }
    if (counts) {
      CHECK(counts->uploads == 2);  // nothing more after the first step
      CHECK(counts->downloads == 0);
      CHECK(metrics->host_to_device_transfers == 2);
      CHECK(metrics->device_to_host_transfers == 0);
    }
  }
  return values(x);
}

}  // namespace

TEST_CASE("a loop of steps moves no data between host and device after the first step") {
  auto backend = load_backend(kCounting);
  REQUIRE_MESSAGE(backend.ok(), (backend.ok() ? "" : backend.error().message));
  CountingStats& counts = stats();
  counts = {};
  std::vector<float> got;
  {
    Engine engine(pipeline("canonicalize,fuse,lower"), **backend);
    Context ctx(engine);
    got = train(ctx, 10, &counts, &engine.metrics());
    // The read copied the one tensor read, once; reading again copies nothing.
    CHECK(counts.downloads == 1);
    CHECK(counts.download_bytes == 8 * sizeof(float));
    CHECK(engine.metrics().device_to_host_transfers == 1);
    CHECK(engine.metrics().device_to_host_bytes == 8 * sizeof(float));
    CHECK(counts.executions == 10);
    CHECK(engine.metrics().cache_misses == 1);
  }
  CHECK(counts.live_buffers == 0);  // every buffer the host held was destroyed
  Session reference;
  std::vector<float> want = train(reference.ctx, 10, nullptr, nullptr);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

// The experiment runner times every other step on the host only: those
// steps ask the backend for no event, and waiting waits for the device.
TEST_CASE("executions without device timing ask for no event, and waiting synchronizes the device") {
  auto backend = load_backend(kCounting);
  REQUIRE(backend.ok());
  CountingStats& counts = stats();
  counts = {};
  Engine engine(pipeline("lower"), **backend);
  Context ctx(engine);
  Tensor x = ctx.from_vector<float>({1, 2, 3}, {3});
  for (bool device_timing : {true, false, true}) {
    CAPTURE(device_timing);
    engine.set_device_timing(device_timing);
    uint64_t events = counts.executions_with_event, synchronizations = counts.synchronizations;
    x = x * 2.0;
    REQUIRE(ctx.mark_step().ok());
    REQUIRE(ctx.wait().ok());
    CHECK(counts.executions_with_event - events == (device_timing ? 1 : 0));
    CHECK(counts.synchronizations - synchronizations == (device_timing ? 0 : 1));
  }
  engine.set_device_timing(false);
  engine.set_profile_kernels(true);  // profiled executions are timed on the device all the same
  uint64_t events = counts.executions_with_event;
  x = x + 1.0;
  REQUIRE(ctx.mark_step().ok());
  REQUIRE(ctx.wait().ok());
  CHECK(counts.executions_with_event - events == 1);
  check_close(values(x), {9, 17, 25});
}

TEST_CASE("a host-memory backend reads results in place and waits trivially") {
  Session s("lower");
  Tensor x = s.ctx.from_vector<float>({1, 2, 3}, {3});
  Tensor y = x * 2.0;
  REQUIRE(s.ctx.sync().ok());
  REQUIRE(s.ctx.wait().ok());
  auto first = y.data();
  auto second = y.data();
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK((*first)->data() == (*second)->data());  // read once, then kept
  check_close(values(y), {2, 4, 6});
  CHECK(s.engine.metrics().device_execute_ms >= 0);
}
