// lazylab import MODEL.onnx -o DIR: the model as a .lzir graph and its
// weights as NumPy arrays (DIR/NAME.lzir, DIR/NAME.weights/N.npy for
// parameter N), which an experiment runs as {file: NAME.lzir, weights:
// NAME.weights}.
#include <fmt/format.h>

#include <chrono>

#include <filesystem>
#include <iostream>

#include "core/text_format.h"
#include "onnx/npy_tensor.h"
#include "onnx/onnx_import.h"
#include "options.h"
#include "runner/report.h"

namespace lazylab::cli {
namespace {

namespace fs = std::filesystem;

Expected<OnnxImportOptions> import_options(const std::vector<std::string>& params) {
  OnnxImportOptions options;
  for (const std::string& param : params) {
    size_t eq = param.find('=');
    int64_t value = 0;
    bool parsed = eq != std::string::npos;
    if (parsed) try {
        size_t used = 0;
        value = std::stoll(param.substr(eq + 1), &used);
        parsed = used == param.size() - eq - 1 && value > 0;
      } catch (const std::exception&) {
        parsed = false;
      }
    if (!parsed) return make_error(fmt::format("--param '{}': expected NAME=N with N > 0", param));
    options.dims[param.substr(0, eq)] = value;
  }
  return options;
}

Status write_import(const OnnxModel& model, const fs::path& out, const std::string& name) {
  std::error_code ec;
  fs::path weights = out / (name + ".weights");
  fs::create_directories(weights, ec);
  if (ec) return make_error(fmt::format("cannot create {}: {}", weights.string(), ec.message()));
  for (size_t i = 0; i < model.weights.size(); ++i)
    LAZYLAB_TRY(write_npy((weights / fmt::format("{}.npy", model.inputs.size() + i)).string(), model.weights[i]));
  std::string text = fmt::format("// {} imported by lazylab: parameters 0..{} are the model's inputs", model.path,
                                 static_cast<int64_t>(model.inputs.size()) - 1);
  for (size_t i = 0; i < model.inputs.size(); ++i) text += fmt::format("\n//   {}: {}", i, model.inputs[i].name);
  text += fmt::format("\n// parameters {}.. are its weights, in {}.weights/N.npy\n", model.inputs.size(), name);
  text += print_graph(model.graph, name);
  return write_file_atomically((out / (name + ".lzir")).string(), text);
}

}  // namespace

int import_command(const Args& args) {
  po::options_description options("lazylab import options");
  std::string model_path, output;
  std::vector<std::string> params;
  options.add_options()("model", po::value(&model_path)->required(), "an ONNX model")(
      "output-dir,o", po::value(&output)->required(), "the folder to write NAME.lzir and NAME.weights/ into")(
      "param", po::value(&params), "NAME=N: bind the symbolic dimension NAME (repeatable)");
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  if (auto exit =
          parse_args(args, "usage: lazylab import MODEL.onnx -o DIR [--param NAME=N]...", options, positional, vm))
    return *exit;
  auto import = import_options(params);
  if (!import) {
    std::cerr << "lazylab: " << import.error().message << "\n";
    return kExitUsage;
  }
  auto started = std::chrono::steady_clock::now();
  auto model = import_onnx_file(model_path, *import);
  double import_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!model) {
    std::cerr << "lazylab: " << model.error().message << "\n";
    return kExitError;
  }
  std::string name = fs::path(model_path).stem().string();
  if (Status written = write_import(*model, output, name); !written) {
    std::cerr << "lazylab: " << written.error().message << "\n";
    return kExitError;
  }
  std::cout << fmt::format("imported in {:.3f} s (read, checked, shape-inferred and converted)\n", import_s);
  std::cout << fmt::format("wrote {}/{}.lzir ({} nodes, {} inputs) and {} weights in {}/{}.weights\n", output, name,
                           model->graph.size(), model->inputs.size(), model->weights.size(), output, name);
  return kExitOk;
}

}  // namespace lazylab::cli
