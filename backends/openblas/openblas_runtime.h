// OpenBLAS, opened at run time so that lazylab can choose its kernels first.
//
// OpenBLAS picks its kernels (the "core type") once, when the library loads.
// Releases before Zen 4 support (Debian 12 ships 0.3.21) run AMD CPUs with
// AVX-512 on their AVX2 Zen kernels, about half the sgemm rate of the
// AVX-512 SkylakeX kernels on the same machine. Loading the library here,
// after setting OPENBLAS_CORETYPE for that case only, gives every user in the
// process (every cpu backend, and the host ceilings it measures) the same,
// right kernels.
// An OPENBLAS_CORETYPE set by the user is kept.
#pragma once

#include <cblas.h>

#include <string>

namespace lazylab::openblas {

struct Runtime {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_sgemv) sgemv = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  std::string config;     // openblas_get_config()
  std::string core;       // openblas_get_corename()
  std::string core_note;  // who chose the core type, and why
};

// Opens libopenblas.so.0 once per process. nullptr, with `error` saying
// why, when it cannot be opened or lacks a symbol.
const Runtime* runtime(std::string& error);

// Chooses the kernels before the first runtime() call: "auto" is lazylab's
// choice even over an inherited OPENBLAS_CORETYPE, anything else an OpenBLAS
// core name. False, with `error`, once OpenBLAS is loaded (unless `core` is
// what was chosen then).
bool choose_core(const std::string& core, std::string& error);

}  // namespace lazylab::openblas
