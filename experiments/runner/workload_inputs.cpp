#include "workload_inputs.h"

namespace lazylab {
namespace {

template <class T>
void fill_values(T* out, int64_t n, std::mt19937_64& rng, Fill fill, double scale, DType dtype) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    double v = fill == Fill::Normal     ? normal(rng) * scale
               : fill == Fill::Positive ? (1.0 + 0.5 * uniform(rng)) * scale
               : fill == Fill::Constant ? scale
                                        : uniform(rng) * scale;
    if (fill == Fill::Uniform && v == 0) v = scale * 0.5;
    if (is_float(dtype))
      out[i] = static_cast<T>(v);
    else
      out[i] = static_cast<T>(static_cast<int64_t>((v + 1.0) * 50.0) + 1);  // 1..101
  }
}

}  // namespace

HostTensor make_random(const TensorType& type, uint64_t seed, uint64_t index, Fill fill, double scale) {
  std::seed_seq sequence{seed, index, uint64_t{0x6c617a79}};
  std::mt19937_64 rng(sequence);
  auto buffer = std::make_shared<Buffer>(type.bytes());
  int64_t n = type.num_elements();
  if (type.dtype == DType::Bool) {
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint8_t*>(buffer->data())[i] = rng() & 1;
  } else {
    visit_dtype(type.dtype, [&]<class T>(T) {
      fill_values(reinterpret_cast<T*>(buffer->data()), n, rng, fill, scale, type.dtype);
    });
  }
  return HostTensor{type, std::move(buffer)};
}

}  // namespace lazylab
