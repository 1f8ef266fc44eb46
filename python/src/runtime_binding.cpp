// Dtypes, backends, pipelines, engines and graphs.
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include "binding.h"
#include "core/pipeline.h"
#include "core/text_format.h"
#include "core/verifier.h"

namespace lazylab::python {
namespace {

std::shared_ptr<BackendHandle> load(const std::string& name, const std::string& options) {
  return std::make_shared<BackendHandle>(BackendHandle{value_or_raise(load_backend(name, options))});
}

std::shared_ptr<EngineHandle> make_engine(const std::string& pipeline_text, std::shared_ptr<BackendHandle> backend,
                                          size_t cache_capacity, bool verify_cache_hits, uint64_t max_trace_nodes,
                                          int32_t device) {
  if (!backend) throw LazylabError("Engine: no backend");
  EngineOptions options;
  options.cache_capacity = cache_capacity;
  options.verify_cache_hits = verify_cache_hits;
  options.max_trace_nodes = max_trace_nodes;
  options.device = device;
  Pipeline pipeline = value_or_raise(parse_pipeline(pipeline_text));
  if (!pipeline.lowers)
    throw LazylabError("Engine: pipeline '" + pipeline_text + "' does not lower the graph; end it with 'lower'");
  auto handle = std::make_shared<EngineHandle>();
  handle->backend = std::move(backend);
  handle->engine = std::make_unique<Engine>(std::move(pipeline), *handle->backend->backend, options);
  return handle;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LazylabError(path + ": cannot open a .lzir file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Written whole or not at all: a temporary beside it, renamed over it.
void write_file(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!(out << text) || !out.flush()) throw LazylabError(path + ": cannot write");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw LazylabError(path + ": cannot write");
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::enum_<DType> dtype(m, "DType", "Element types (the dtype table)");
  for (DType d : kAllDTypes) dtype.value(std::string(dtype_name(d)).c_str(), d);
  m.def(
      "dtype",
      [](const std::string& name) {
        auto d = parse_dtype(name);
        if (!d) throw LazylabError("unknown dtype '" + name + "'");
        return *d;
      },
      py::arg("name"), "The dtype spelled as .lzir spells it: 'f32', 'i64', ...");

  py::class_<BackendHandle, std::shared_ptr<BackendHandle>>(m, "Backend", "A backend plugin, loaded and created")
      .def(py::init(&load), py::arg("name"), py::arg("options") = "",
           "Loads the backend plugin `name` (or a path to its .so) and creates it with 'key=value,...' options")
      .def_property_readonly("name", [](const BackendHandle& b) { return b.backend->name(); })
      .def_property_readonly("path", [](const BackendHandle& b) { return b.backend->path(); })
      .def_property_readonly("summary", [](const BackendHandle& b) { return b.backend->summary(); })
      .def_property_readonly("device", [](const BackendHandle& b) { return b.backend->device_description(); })
      .def("__repr__", [](const BackendHandle& b) { return "<lazylab.Backend " + b.backend->name() + ">"; });

  m.def(
      "backends",
      [] {
        std::vector<std::pair<std::string, std::string>> found;
        for (const BackendListing& listing : find_backend_plugins()) found.emplace_back(listing.name, listing.path);
        return found;
      },
      "(name, file) of each backend plugin on the plugin path, loading none");

  py::class_<Pipeline>(m, "Pipeline", "A pass pipeline, parsed and checked")
      .def(py::init([](const std::string& text) { return value_or_raise(parse_pipeline(text)); }), py::arg("text"))
      .def_readonly("canonical", &Pipeline::canonical)
      .def_readonly("lowers", &Pipeline::lowers)
      .def("__repr__", [](const Pipeline& p) { return "<lazylab.Pipeline '" + p.canonical + "'>"; });

  py::class_<EngineHandle, std::shared_ptr<EngineHandle>>(
      m, "Engine", "A pipeline and a backend behind a computation cache: what a Context's syncs run on")
      .def(py::init(&make_engine), py::arg("pipeline"), py::arg("backend"), py::arg("cache_capacity") = 128,
           py::arg("verify_cache_hits") = false, py::arg("max_trace_nodes") = kDefaultMaxTraceNodes,
           py::arg("device") = 0)
      .def_property_readonly("backend", [](const EngineHandle& e) { return e.backend; })
      .def_property_readonly("pipeline", [](const EngineHandle& e) { return e.engine->pipeline().canonical; });

  py::class_<Graph>(m, "Graph", "A trace cut into a graph: pure, hashed, printable as .lzir")
      .def_property_readonly("hash", &Graph::hash)
      .def("__len__", &Graph::size)
      .def_property_readonly("num_parameters", [](const Graph& g) { return g.parameters().size(); })
      .def_property_readonly("num_outputs", [](const Graph& g) { return g.roots().size(); })
      .def("verify", [](const Graph& g) { check(verify(g)); })
      .def(
          "text", [](const Graph& g, const std::string& name) { return print_graph(g, name); },
          py::arg("name") = "main", "The graph in the .lzir text format")
      .def(
          "save",
          [](const Graph& g, const std::string& path, const std::string& name) {
            write_file(path, print_graph(g, name));
          },
          py::arg("path"), py::arg("name") = "main", "Writes the graph as a .lzir file")
      .def("__repr__", [](const Graph& g) {
        return "<lazylab.Graph " + std::to_string(g.size()) + " nodes, " + std::to_string(g.roots().size()) +
               " outputs>";
      });

  m.def(
      "parse_lzir",
      [](const std::string& text, const std::string& source) {
        NamedGraph parsed = value_or_raise(parse_graph(text, source));
        check(verify(parsed.graph));
        return std::make_pair(parsed.name, std::move(parsed.graph));
      },
      py::arg("text"), py::arg("source") = "<input>", "(name, Graph) from .lzir text; errors name line and column");
  m.def(
      "read_lzir",
      [](const std::string& path) {
        NamedGraph parsed = value_or_raise(parse_graph(read_file(path), path));
        check(verify(parsed.graph));
        return std::make_pair(parsed.name, std::move(parsed.graph));
      },
      py::arg("path"), "(name, Graph) from a .lzir file");
}

}  // namespace lazylab::python
