#include "onnx/npy_tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

namespace lazylab {
namespace {

// An element as xtensor writes and reads it: its storage, or for a 16-bit
// float (which xtensor does not know) its bits, as a uint16.
template <class T>
using NpyElement = std::conditional_t<std::is_arithmetic_v<T>, T, uint16_t>;

template <class T>
void dump(std::ofstream& out, const NamedTensor& tensor, const char* descr) {
  using E = NpyElement<T>;
  std::vector<size_t> shape(tensor.type.shape.begin(), tensor.type.shape.end());
  auto view = xt::adapt(reinterpret_cast<const E*>(tensor.data->data()),
                        static_cast<size_t>(tensor.type.num_elements()), xt::no_ownership(), shape);
  std::string bytes = xt::dump_npy(view);
  if constexpr (!std::is_same_v<E, T>)  // the header's descr is the bits' ('<u2'): say what they are
    bytes.replace(bytes.find("'<u2'"), 5, fmt::format("'{}'", descr));
  out << bytes;
}

template <class T>
NamedTensor load(std::ifstream& in, DType dtype, const std::string& path) {
  using E = NpyElement<T>;
  xt::xarray<E> array = xt::detail::load_npy_file(in).cast<E>(std::is_same_v<E, T>);  // bits: checked by npy_dtype
  NamedTensor tensor{path, {dtype, {}}, nullptr};
  for (size_t d : array.shape()) tensor.type.shape.push_back(static_cast<int64_t>(d));
  tensor.data = std::make_shared<Buffer>(array.size() * sizeof(T));
  if (array.size() != 0) std::memcpy(tensor.data->data(), array.data(), array.size() * sizeof(T));
  return tensor;
}

// The dtype of an .npy file, from its header's descr ('<f4', '|b1', ...).
std::optional<DType> npy_dtype(std::ifstream& in) {
  std::string header(128, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  in.clear();
  in.seekg(0);
  for (DType dtype : kAllDTypes) {
    const char* descr = dtypes::row(dtype_id(dtype)).npy_descr;
    if (*descr && header.find(fmt::format("'{}'", descr)) != std::string::npos) return dtype;
  }
  return std::nullopt;
}

}  // namespace

Status write_npy(const std::string& path, const NamedTensor& tensor) {
  const char* descr = dtypes::row(dtype_id(tensor.type.dtype)).npy_descr;
  if (!*descr)
    return make_error(
        fmt::format("{}: NumPy has no {}, so an .npy file cannot hold it", path, dtype_name(tensor.type.dtype)));
  std::ofstream out(path, std::ios::binary);
  if (!out) return make_error(fmt::format("cannot write {}", path));
  visit_dtype(tensor.type.dtype, [&]<class T>(T) { dump<T>(out, tensor, descr); });
  if (!out.flush()) return make_error(fmt::format("cannot write {}", path));
  return {};
}

Expected<NamedTensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  std::optional<DType> dtype = npy_dtype(in);
  if (!dtype) {
    std::vector<std::string_view> names;
    for (DType d : kAllDTypes)
      if (*dtypes::row(dtype_id(d)).npy_descr) names.push_back(dtype_name(d));
    return make_error(fmt::format("{}: not an .npy array of {} (little-endian)", path, fmt::join(names, ", ")));
  }
  try {
    return visit_dtype(*dtype, [&]<class T>(T) { return load<T>(in, *dtype, path); });
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: {}", path, e.what()));
  }
  return make_error(fmt::format("{}: unreadable", path));
}

}  // namespace lazylab
