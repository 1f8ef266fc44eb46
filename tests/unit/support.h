// Shared test helpers: an interpreter-backed engine and value readers.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/engine.h"
#include "core/pipeline.h"
#include "core/tensor.h"
#include "core/tensor_ops.h"

namespace lazylab::testing {

#ifdef LAZYLAB_TEST_PLUGIN_DIR  // the unit tests' build defines it
// The test backend plugin NAME (tests/plugins), by path.
inline std::string test_backend_plugin(const std::string& name) {
  return std::string(LAZYLAB_TEST_PLUGIN_DIR) + "/lazylab-backend-" + name + ".so";
}
#endif

inline std::unique_ptr<Backend> interp_backend() {
  auto backend = load_backend("interp");
  REQUIRE_MESSAGE(backend.ok(), (backend.ok() ? "" : backend.error().message));
  return std::move(*backend);
}

inline Pipeline pipeline(const std::string& text) {
  auto parsed = parse_pipeline(text);
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
  return std::move(*parsed);
}

// An interpreter engine and a context on it.
struct Session {
  explicit Session(const std::string& pipeline_text = "lower", EngineOptions options = {})
      : backend(interp_backend()), engine(pipeline(pipeline_text), *backend, options), ctx(engine) {}
  std::unique_ptr<Backend> backend;
  Engine engine;
  Context ctx;
};

template <class T = float>
std::vector<T> values(const Tensor& t) {
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error()->message));
  auto v = t.to_vector<T>();
  REQUIRE_MESSAGE(v.ok(), (v.ok() ? "" : v.error().message));
  return *v;
}

inline void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(got[i] == doctest::Approx(want[i]).epsilon(tol), "element " << i);
}

}  // namespace lazylab::testing
