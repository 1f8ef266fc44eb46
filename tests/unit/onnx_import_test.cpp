// The ONNX importer on models built here with libonnx's protobuf classes:
// what becomes a parameter, and how each kind of bad model is refused.
#include <onnx/onnx_pb.h>

// GCC 12 warns wrongly on protobuf's inlined string setters (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/text_format.h"
#include "onnx/npy_tensor.h"
#include "onnx/onnx_import.h"
#include "runner/workload.h"
#include "support.h"

using namespace lazylab;

namespace {

void add_tensor_value(onnx::ValueInfoProto* value, const std::string& name, std::vector<std::string> dims) {
  value->set_name(name);
  auto* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& dim : dims) {
    auto* d = tensor->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(dim[0])))
      d->set_dim_value(std::stoll(dim));
    else
      d->set_dim_param(dim);
  }
}

// y = OP(x) or, with a weight, y = x @ W; x is [batch, 3].
std::string model_bytes(const std::string& op, int64_t opset, bool weight = false) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* import = model.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  auto* graph = model.mutable_graph();
  graph->set_name("g");
  add_tensor_value(graph->add_input(), "x", {"batch", "3"});
  auto* node = graph->add_node();
  node->set_name("my_node");
  node->set_op_type(op);
  node->add_input("x");
  if (weight) {
    node->add_input("W");
    auto* w = graph->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    w->add_dims(4);
    for (int i = 0; i < 12; ++i) w->add_float_data(static_cast<float>(i));
  }
  node->add_output("y");
  add_tensor_value(graph->add_output(), "y", {"batch", weight ? "4" : "3"});
  return model.SerializeAsString();
}

OnnxImportOptions batch_of(int64_t n) {
  OnnxImportOptions options;
  options.dims["batch"] = n;
  return options;
}

}  // namespace

TEST_CASE("model inputs come first among the parameters, initializers after them, with their data") {
  auto model = import_onnx_bytes(model_bytes("MatMul", 17, true), "mm.onnx", batch_of(2));
  REQUIRE_MESSAGE(model.ok(), (model.ok() ? "" : model.error().message));
  REQUIRE(model->inputs.size() == 1);
  CHECK(model->inputs[0].name == "x");
  CHECK(to_string(model->inputs[0].type) == "f32[2,3]");
  REQUIRE(model->weights.size() == 1);
  CHECK(model->weights[0].name == "W");
  CHECK(reinterpret_cast<const float*>(model->weights[0].data->data())[11] == 11.0f);
  std::vector<NodeId> parameters = model->graph.parameters();
  REQUIRE(parameters.size() == 2);
  CHECK(model->graph.node(parameters[0]).attrs[0].i + model->graph.node(parameters[1]).attrs[0].i == 1);
  CHECK(model->outputs == std::vector<std::string>{"y"});
  CHECK(to_string(model->graph.node(model->graph.roots()[0]).type) == "f32[2,4]");
}

TEST_CASE("an unbound symbolic dimension names the input and the dimension") {
  auto model = import_onnx_bytes(model_bytes("Relu", 17), "relu.onnx");
  REQUIRE_FALSE(model.ok());
  CHECK(model.error().message ==
        "relu.onnx: input 'x': dimension 0 is symbolic ('batch'); bind it (params: {batch: N})");
}

TEST_CASE("an op lazylab lacks names the node, its op, the opset and the file, and is marked unsupported") {
  OnnxUnsupported gap;
  auto model = import_onnx_bytes(model_bytes("Softplus", 17), "softplus.onnx", batch_of(2), &gap);
  REQUIRE_FALSE(model.ok());
  CHECK(model.error().message ==
        "softplus.onnx: node 'my_node' (Softplus, opset 17): lazylab does not implement this op");
  CHECK(gap.op_type == "Softplus");
}

TEST_CASE("an older opset is converted by libonnx's version converter") {
  auto model = import_onnx_bytes(model_bytes("Relu", 11), "old.onnx", batch_of(2));
  REQUIRE_MESSAGE(model.ok(), (model.ok() ? "" : model.error().message));
  CHECK(model->opset == kOnnxMinOpset);
}

TEST_CASE("truncated, empty and invalid models are errors, never crashes") {
  std::string bytes = model_bytes("Relu", 17);
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    CAPTURE(cut);
    auto model = import_onnx_bytes(bytes.substr(0, cut), "cut.onnx", batch_of(2));
    CHECK_FALSE(model.ok());
    if (!model.ok()) CHECK(model.error().message.starts_with("cut.onnx: "));
  }
  auto missing = import_onnx_file("/nonexistent/model.onnx");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("/nonexistent/model.onnx") != std::string::npos);
}

TEST_CASE(".npy files round-trip every dtype NumPy has; bf16 is an error naming it") {
  std::string folder = std::filesystem::temp_directory_path() / "lazylab-npy-test";
  std::filesystem::create_directories(folder);
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    if (dtype == DType::BF16) {
      NamedTensor tensor{"t", {dtype, {2}}, std::make_shared<Buffer>(4)};
      Status written = write_npy(folder + "/bf16.npy", tensor);
      REQUIRE_FALSE(written.ok());
      CHECK(written.error().message == folder + "/bf16.npy: NumPy has no bf16, so an .npy file cannot hold it");
      CHECK_FALSE(std::filesystem::exists(folder + "/bf16.npy"));
      continue;
    }
    NamedTensor tensor{"t", {dtype, {2, 3}}, nullptr};
    tensor.data = std::make_shared<Buffer>(tensor.type.bytes());
    for (size_t i = 0; i < tensor.data->bytes(); ++i)
      tensor.data->data()[i] = std::byte(dtype == DType::Bool ? i % 2 : i);
    std::string path = folder + "/t.npy";
    REQUIRE(write_npy(path, tensor).ok());
    auto back = read_npy(path);
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
    CHECK(back->type == tensor.type);
    CHECK(std::memcmp(back->data->data(), tensor.data->data(), tensor.data->bytes()) == 0);
  }
  std::ofstream(folder + "/bad.npy") << "not numpy";
  auto bad = read_npy(folder + "/bad.npy");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("not an .npy array") != std::string::npos);
  std::filesystem::remove_all(folder);
}

TEST_CASE("a model imported as .lzir with .npy weights binds the same weights as the model itself") {
  const std::string path = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Linear/model.onnx";
  if (!std::filesystem::exists(path)) {
    MESSAGE("skipped: no libonnx-testdata");
    return;
  }
  auto model = import_onnx_file(path);
  REQUIRE(model.ok());
  std::string folder = std::filesystem::temp_directory_path() / "lazylab-import-test";
  std::filesystem::create_directories(folder + "/weights");
  for (size_t i = 0; i < model->weights.size(); ++i)
    REQUIRE(
        write_npy(folder + "/weights/" + std::to_string(model->inputs.size() + i) + ".npy", model->weights[i]).ok());
  std::ofstream(folder + "/linear.lzir") << print_graph(model->graph, "linear");
  auto from_model = make_workload(path, {});
  auto from_file = make_workload(folder + "/linear.lzir", {}, folder + "/weights");
  REQUIRE(from_model.ok());
  REQUIRE_MESSAGE(from_file.ok(), (from_file.ok() ? "" : from_file.error().message));
  std::vector<HostTensor> a = (*from_model)->make_inputs(5), b = (*from_file)->make_inputs(5);
  REQUIRE(a.size() == 3);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i].type == b[i].type);
    if (i >= model->inputs.size())  // the weights; the model's input is its data set's
      CHECK(std::memcmp(a[i].data->data(), b[i].data->data(), a[i].data->bytes()) == 0);
  }
  // The model folder has a test data set: its workload's input is that one.
  auto data_set = read_onnx_tensor_file(std::filesystem::path(path).parent_path() / "test_data_set_0" / "input_0.pb");
  REQUIRE(data_set.ok());
  CHECK(std::memcmp(a[0].data->data(), data_set->data->data(), a[0].data->bytes()) == 0);
  auto mismatched = make_workload(folder + "/linear.lzir", {}, folder);  // no N.npy here: random inputs
  CHECK(mismatched.ok());
  std::filesystem::rename(folder + "/weights/1.npy", folder + "/weights/2.npy");
  auto wrong = make_workload(folder + "/linear.lzir", {}, folder + "/weights");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message.find("parameter 2 is f32[8], but") != std::string::npos);
  std::filesystem::remove_all(folder);
}
