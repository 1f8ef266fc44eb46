// The dtype table (dtypes.def) and what reads it.
#include <doctest/doctest.h>

#include <set>
#include <string>

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
