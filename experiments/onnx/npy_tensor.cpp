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

template <class T>
void dump(std::ofstream& out, const NamedTensor& tensor) {
  std::vector<size_t> shape(tensor.type.shape.begin(), tensor.type.shape.end());
  auto view = xt::adapt(reinterpret_cast<const T*>(tensor.data->data()),
                        static_cast<size_t>(tensor.type.num_elements()), xt::no_ownership(), shape);
  out << xt::dump_npy(view);
}

template <class T>
NamedTensor load(std::ifstream& in, DType dtype, const std::string& path) {
  xt::xarray<T> array = xt::load_npy<T>(in);
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
  for (DType dtype : kAllDTypes)
    if (header.find(fmt::format("'{}'", dtypes::row(dtype_id(dtype)).npy_descr)) != std::string::npos) return dtype;
  return std::nullopt;
}

}  // namespace

Status write_npy(const std::string& path, const NamedTensor& tensor) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return make_error(fmt::format("cannot write {}", path));
  // A bool's byte (0 or 1) is xtensor's `bool`, whose header says '|b1'.
  visit_dtype(tensor.type.dtype, [&]<class T>(T) {
    if (tensor.type.dtype == DType::Bool)
      dump<bool>(out, tensor);
    else
      dump<T>(out, tensor);
  });
  if (!out.flush()) return make_error(fmt::format("cannot write {}", path));
  return {};
}

Expected<NamedTensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  std::optional<DType> dtype = npy_dtype(in);
  if (!dtype) {
    std::vector<std::string_view> names;
    for (DType d : kAllDTypes) names.push_back(dtype_name(d));
    return make_error(fmt::format("{}: not an .npy array of {} (little-endian)", path, fmt::join(names, ", ")));
  }
  try {
    return visit_dtype(*dtype, [&]<class T>(T) {
      return *dtype == DType::Bool ? load<bool>(in, *dtype, path) : load<T>(in, *dtype, path);
    });
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: {}", path, e.what()));
  }
  return make_error(fmt::format("{}: unreadable", path));
}

}  // namespace lazylab
