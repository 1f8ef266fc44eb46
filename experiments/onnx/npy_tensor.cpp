#include "onnx/npy_tensor.h"

#include <fmt/format.h>

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
  for (auto [descr, dtype] :
       {std::pair{"'<f4'", DType::F32}, std::pair{"'<f8'", DType::F64}, std::pair{"'<i4'", DType::I32},
        std::pair{"'<i8'", DType::I64}, std::pair{"'|b1'", DType::Bool}})
    if (header.find(descr) != std::string::npos) return dtype;
  return std::nullopt;
}

}  // namespace

Status write_npy(const std::string& path, const NamedTensor& tensor) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return make_error(fmt::format("cannot write {}", path));
  switch (tensor.type.dtype) {
    case DType::F32: dump<float>(out, tensor); break;
    case DType::F64: dump<double>(out, tensor); break;
    case DType::I32: dump<int32_t>(out, tensor); break;
    case DType::I64: dump<int64_t>(out, tensor); break;
    case DType::Bool: dump<bool>(out, tensor); break;
  }
  if (!out.flush()) return make_error(fmt::format("cannot write {}", path));
  return {};
}

Expected<NamedTensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  std::optional<DType> dtype = npy_dtype(in);
  if (!dtype)
    return make_error(fmt::format("{}: not an .npy array of f32, f64, i32, i64 or bool (little-endian)", path));
  try {
    switch (*dtype) {
      case DType::F32: return load<float>(in, *dtype, path);
      case DType::F64: return load<double>(in, *dtype, path);
      case DType::I32: return load<int32_t>(in, *dtype, path);
      case DType::I64: return load<int64_t>(in, *dtype, path);
      case DType::Bool: return load<bool>(in, *dtype, path);
    }
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: {}", path, e.what()));
  }
  return make_error(fmt::format("{}: unreadable", path));
}

}  // namespace lazylab
