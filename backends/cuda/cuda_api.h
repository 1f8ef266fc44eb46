// The CUDA libraries the backend uses, opened at run time with dlopen so the
// plugin itself loads on a machine without a driver or a GPU (and says so
// when a backend is created): the driver API (libcuda.so.1), NVRTC and
// cuBLASLt. The toolkit's headers give the types; nothing links against the
// libraries.
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>

#include <string>

namespace lazylab::cuda {

// Two-level stringification: cuda.h maps names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2), and dlsym needs the versioned one.
#define LAZYLAB_CUDA_SYMBOL(name) LAZYLAB_CUDA_STRING(name)
#define LAZYLAB_CUDA_STRING(name) #name

struct Driver {
  // clang-format off
#define LAZYLAB_DRIVER_FUNCTIONS(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) \
  X(cuStreamCreate) \
  X(cuStreamDestroy) \
  X(cuStreamSynchronize) \
  X(cuStreamWaitEvent) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemsetD8Async) \
  X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolSetAttribute) \
  X(cuModuleLoadData) \
  X(cuModuleUnload) \
  X(cuModuleGetFunction) \
  X(cuLaunchKernel) \
  X(cuEventCreate) \
  X(cuEventRecord) \
  X(cuEventRecordWithFlags) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuEventDestroy) \
  X(cuGetErrorName) \
  X(cuGetErrorString) \
  X(cuFuncSetAttribute) \
  X(cuFuncGetAttribute) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy)
#define LAZYLAB_DECLARE(name) decltype(&::name) name = nullptr;
  LAZYLAB_DRIVER_FUNCTIONS(LAZYLAB_DECLARE)
  // clang-format on
#undef LAZYLAB_DECLARE
  int version = 0;
};

struct Nvrtc {
  // clang-format off
#define LAZYLAB_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion) \
  X(nvrtcCreateProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetErrorString)
#define LAZYLAB_DECLARE(name) decltype(&::name) name = nullptr;
  LAZYLAB_NVRTC_FUNCTIONS(LAZYLAB_DECLARE)
  // clang-format on
#undef LAZYLAB_DECLARE
  int major = 0, minor = 0;
};

struct CublasLt {
  // clang-format off
#define LAZYLAB_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate) \
  X(cublasLtDestroy) \
  X(cublasLtGetVersion) \
  X(cublasLtMatmulDescCreate) \
  X(cublasLtMatmulDescDestroy) \
  X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) \
  X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatrixLayoutSetAttribute) \
  X(cublasLtMatmulPreferenceCreate) \
  X(cublasLtMatmulPreferenceDestroy) \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic) \
  X(cublasLtMatmulAlgoCheck) \
  X(cublasLtMatmulAlgoGetIds) \
  X(cublasLtMatmulAlgoInit) \
  X(cublasLtMatmulAlgoCapGetAttribute) \
  X(cublasLtMatmulAlgoConfigSetAttribute) \
  X(cublasLtMatmul)
#define LAZYLAB_DECLARE(name) decltype(&::name) name = nullptr;
  LAZYLAB_CUBLASLT_FUNCTIONS(LAZYLAB_DECLARE)
  // clang-format on
#undef LAZYLAB_DECLARE
};

// Each opens its library once per process; nullptr with `error` naming the
// library and why when it cannot be opened or lacks a function.
const Driver* driver(std::string& error);
const Nvrtc* nvrtc(std::string& error);
const CublasLt* cublaslt(std::string& error);

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory"
std::string driver_error(const Driver& driver, CUresult result);

// Throws std::runtime_error naming `what` when `result` is not success.
void check(const Driver& driver, CUresult result, const char* what);
void check(cublasStatus_t status, const char* what);

}  // namespace lazylab::cuda
