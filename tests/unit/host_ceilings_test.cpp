#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "backends/cpu/host_ceilings.h"

// The copy behind the host's copy ceiling, built with the cpu backend's
// vector ISA (backends/cpu/meson.build), at every alignment of its target.
TEST_CASE("copy_past_caches copies every float, whatever the target's alignment and the length") {
  std::vector<float> source(300), target(320);
  std::iota(source.begin(), source.end(), 1.0f);
  for (size_t offset : {0, 1, 3, 5, 15})
    for (size_t n : {0, 1, 7, 16, 17, 64, 255, 300}) {
      std::fill(target.begin(), target.end(), -1.0f);
      lazylab::cpu::copy_past_caches(target.data() + offset, source.data(), n);
      for (size_t i = 0; i < target.size(); ++i) {
        bool copied = i >= offset && i < offset + n;
        CHECK_MESSAGE(target[i] == (copied ? source[i - offset] : -1.0f), "offset ", offset, " n ", n, " i ", i);
      }
    }
}

TEST_CASE("the host's ceilings: every rate measured, the library named, the peers' environment its kernels") {
  std::string no_blas;
  const lazylab::openblas::Runtime* blas = lazylab::openblas::runtime(no_blas);
  REQUIRE_MESSAGE(blas, no_blas);
  lazylab::cpu::HostCeilingsProbe probe(blas, "", 1);
  lazylab::plugin::HostCeilings full = probe.measure(false);
  CHECK(full.copy_gb_s > 0);
  CHECK(full.elementwise_gop_s > 0);
  CHECK(full.gemm_gflop_s > 0);
  CHECK(full.gemm_library.find("core " + blas->core) != std::string::npos);
  CHECK(full.peer_environment == "OPENBLAS_CORETYPE=" + blas->core);
  CHECK(full.method.find("best of 10") != std::string::npos);
  lazylab::plugin::HostCeilings quick = probe.measure(true);  // one trial each, no elementwise rate
  CHECK(quick.copy_gb_s > 0);
  CHECK(quick.gemm_gflop_s > 0);
  CHECK(quick.elementwise_gop_s == 0);

  lazylab::cpu::HostCeilingsProbe without(nullptr, "cannot open libopenblas.so.0", 1);
  lazylab::plugin::HostCeilings no_product = without.measure(true);
  CHECK(no_product.copy_gb_s > 0);
  CHECK(no_product.gemm_gflop_s == 0);
  CHECK(no_product.gemm_library == "cannot open libopenblas.so.0");
  CHECK(no_product.peer_environment.empty());
}
