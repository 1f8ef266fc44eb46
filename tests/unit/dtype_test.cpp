// The dtype table (dtypes.def) and what reads it.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"

using namespace lazylab;

TEST_CASE("every dtype of the table: its name parses back, its storage is its size, its codes are its own") {
  std::set<std::string> names, npy;
  std::set<int32_t> onnx;
  std::set<std::pair<int, size_t>> dlpack;
  CHECK(std::size(kAllDTypes) == dtypes::kCount);
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    const dtypes::Row& row = dtypes::row(dtype_id(dtype));
    CHECK(parse_dtype(dtype_name(dtype)) == dtype);
    CHECK(visit_dtype(dtype, []<class T>(T) { return sizeof(T); }) == dtype_size(dtype));
    CHECK(visit_dtype(dtype, []<class T>(T) { return dtype_of<T>(); }) == dtype);
    CHECK(is_float(dtype) == (row.kind == dtypes::Kind::Float));
    CHECK(names.insert(row.name).second);
    if (*row.npy_descr) CHECK(npy.insert(row.npy_descr).second);  // "": NumPy has none
    CHECK(onnx.insert(row.onnx_type).second);
    CHECK(dlpack.insert({row.dlpack_code, row.size}).second);
  }
  CHECK(dtype_name(DType::F32) == "f32");  // the ABI's ids are the rows' positions
  CHECK(dtype_id(DType::Bool) == LAZYLAB_BOOL);
  CHECK(dtypes::size(LAZYLAB_I64) == 8);
  CHECK_FALSE(dtypes::known(LAZYLAB_DTYPE_COUNT));
  CHECK(std::string(dtypes::name(LAZYLAB_DTYPE_COUNT)) == "?");
  CHECK_THROWS_WITH_AS(dtypes::visit(LAZYLAB_DTYPE_COUNT, []<class T>(T) { return 0; }),
                       ("dtype " + std::to_string(LAZYLAB_DTYPE_COUNT) + " is not in lazylab's dtype table").c_str(),
                       std::invalid_argument);
  CHECK_FALSE(parse_dtype("f8"));
  CHECK(parse_dtype("bf16") == DType::BF16);
  CHECK(dtype_size(DType::F16) == 2);
  CHECK(is_float(DType::BF16));
  CHECK_FALSE(is_float(DType::U8));
}

TEST_CASE("a dtype of an older ABI: the five before 3.13 keep their ids") {
  CHECK(LAZYLAB_F32 == 0);
  CHECK(LAZYLAB_BOOL == 4);
  CHECK(LAZYLAB_BF16 == 5);
  CHECK(LAZYLAB_U8 == 8);
}

// Each value of a dtype of at most 16 bits, by its bit pattern.
template <class T>
std::vector<T> every_value() {
  std::vector<T> values;
  if constexpr (std::is_same_v<T, bool>) {
    values = {false, true};
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 1) {
    for (int bits = 0; bits < 256; ++bits) values.push_back(static_cast<T>(bits));
  } else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) {
    for (uint32_t bits = 0; bits < 65536; ++bits) values.push_back(T::from_bits(static_cast<uint16_t>(bits)));
  }
  return values;
}

// `value` stored as T: integers convert as integers (wrapping), the rest
// through the exact double.
template <class T, class F>
double stored_as(F value) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<F>)
    return static_cast<double>(static_cast<T>(value));
  else
    return static_cast<double>(static_cast<T>(static_cast<double>(value)));
}

TEST_CASE("holds_every_value says whether each value of a dtype is one of another") {
  for (DType from : {DType::Bool, DType::I8, DType::U8, DType::BF16, DType::F16})
    for (DType to : kAllDTypes) {
      CAPTURE(dtype_name(from));
      CAPTURE(dtype_name(to));
      bool all = visit_dtype(from, [&]<class F>(F) {
        return visit_dtype(to, [&]<class T>(T) {
          if (is_float(from) && !is_float(to)) return false;  // a fraction, an infinity: no integer holds it
          for (F value : every_value<F>()) {
            auto exact = static_cast<double>(value);
            double held = stored_as<T>(value);
            if (!(held == exact || (std::isnan(held) && std::isnan(exact)))) return false;
          }
          return true;
        });
      });
      CHECK(holds_every_value(from, to) == all);
    }
  CHECK(holds_every_value(DType::F32, DType::F64));
  CHECK_FALSE(holds_every_value(DType::F64, DType::F32));
  CHECK_FALSE(holds_every_value(DType::F32, DType::BF16));
  CHECK(holds_every_value(DType::I32, DType::F64));
  CHECK(holds_every_value(DType::I32, DType::I64));
  CHECK_FALSE(holds_every_value(DType::I32, DType::F32));  // 2^24 + 1
  CHECK_FALSE(holds_every_value(DType::I64, DType::F64));
  CHECK_FALSE(holds_every_value(DType::I64, DType::I32));
}
