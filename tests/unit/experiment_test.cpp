// Experiment YAML: every malformed input names the key path and line.
#include "runner/experiment.h"
#include "core/pass_manager.h"
#include "core/suggest.h"
#include "runner/output_check.h"
#include "runner/pipeline_sweep.h"
#include "runner/workload.h"
#include "support.h"

#include <filesystem>
#include <set>

using namespace lazylab;
using namespace lazylab::testing;

namespace {

const std::string kValid = R"(name: t
workloads:
  - chain-tiny
  - name: softmax
    params: {rows: 4, cols: 8}
pipelines:
  eager: "fuse,lower"
  clean: "cse,dce,lower"
backends: [interp]
)";

std::string error_of(const std::string& text) {
  auto parsed = parse_experiment(text, "x.yaml");
  REQUIRE_FALSE(parsed.ok());
  return parsed.error().message;
}

}  // namespace

TEST_CASE("a minimal experiment parses with defaults") {
  auto e = parse_experiment(kValid, "dir/x.yaml");
  REQUIRE(e.ok());
  CHECK(e->workloads.size() == 2);
  CHECK(e->workloads[1].params.at("cols") == 8);
  CHECK(e->pipelines[1].name == "clean");  // YAML order is kept
  CHECK(e->baseline == "eager");
  CHECK(e->runs == 10);
  CHECK(e->reference.backend == "interp");
  CHECK(e->hash != 0);
}

TEST_CASE("file workloads resolve against the experiment's folder") {
  auto e = parse_experiment("name: t\nworkloads: [{file: w/a.lzir}]\npipelines: {p: lower}\nbackends: [interp]\n",
                            "exp/x.yaml");
  REQUIRE(e.ok());
  CHECK(e->workloads[0].name == "exp/w/a.lzir");
}

TEST_CASE("malformed experiments are errors with the key path") {
  // A document that is no mapping (the fuzzer's find: it once threw past
  // the moved openblas-core check).
  CHECK(error_of("just a scalar\n") == "x.yaml:1: the experiment: expected a mapping");
  CHECK(error_of("[openblas-core]\n") == "x.yaml:1: the experiment: expected a mapping");
  CHECK(error_of(kValid + "colour: blue\n") ==
        "x.yaml:10: colour: unknown key (allowed: backends, baseline, cache, description, limits, name, "
        "peer-rounds, peer-timeout, peers, pipelines, plugins, prepare, reference, repeat, report, seed, workloads)");
  CHECK(error_of(kValid + "peer-rounds: -1\n") ==
        "x.yaml:10: peer-rounds: must be between 0 and repeat.runs (10), got -1");
  CHECK(error_of(kValid + "peer-rounds: some\n") == "x.yaml:10: peer-rounds: expected an integer, got 'some'");
  CHECK(error_of(kValid + "plugins: capped.so\n") == "x.yaml:10: plugins: expected a list of plugin (.so) paths");
  CHECK(error_of(kValid + "plugins: [[a]]\n") == "x.yaml:10: plugins[0]: expected a path");
  CHECK(error_of(kValid + "repeat: {runs: many}\n") == "x.yaml:10: repeat.runs: expected an integer, got 'many'");
  CHECK(error_of(kValid + "repeat: {runs: 0}\n") ==
        "x.yaml:10: repeat: needs 0 <= warmup <= 1000000, 1 <= runs <= 1000000 and 0 <= profile <= 1000000, got "
        "warmup 2, runs 0, profile 3");
  CHECK(error_of(kValid + "repeat: {profile: -1}\n") ==
        "x.yaml:10: repeat: needs 0 <= warmup <= 1000000, 1 <= runs <= 1000000 and 0 <= profile <= 1000000, got "
        "warmup 2, runs 10, profile -1");
  CHECK(error_of(kValid + "reference: {rtol: tight}\n") == "x.yaml:10: reference.rtol: expected a number, got 'tight'");
  CHECK(error_of(kValid + "baseline: turbo\n") ==
        "x.yaml:10: baseline: 'turbo' is not one of the pipelines (pipelines: eager, clean)");
  CHECK(error_of("name: t\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:1: workloads: missing required key");
  CHECK(
      error_of("name: t\nworkloads: [{name: chain, params: {n: big}}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
      "x.yaml:2: workloads[0].params.n: expected an integer or a list of integers, got 'big'");
  CHECK(error_of("name: t\nworkloads: [{name: chain, file: a.lzir}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0]: give exactly one of 'name', 'file', 'onnx' or 'torch'");
  CHECK(error_of("name: t\nworkloads: [{nme: chain}]\npipelines: {p: lower}\nbackends: [interp]\n")
            .find("workloads[0].nme: unknown key") != std::string::npos);
  CHECK(error_of("name: t\nworkloads: [chain]\npipelines: [lower]\nbackends: [interp]\n") ==
        "x.yaml:3: pipelines: expected a non-empty mapping of name: pipeline text");
  CHECK(error_of("name: t\nworkloads: [chain\n").find("x.yaml:3:1: malformed YAML") == 0);
}

// A 16-bit network's logits: the small ones carry the rounding of the large
// ones' sums, so an element's own magnitude is the wrong scale for them.
TEST_CASE("rtol is of each element, or with relative_to: output of the output's largest magnitude") {
  ReferenceOutputs want{{TensorType{DType::F32, {3}}}, {{100.0, 1.0, -50.0}}};
  ReferenceOutputs got{{TensorType{DType::F32, {3}}}, {{100.5, 1.4, -50.2}}};
  Correctness each = compare_values(got, want, 0.01, 0.0);
  CHECK_FALSE(each.pass);
  CHECK(each.problem == "output 0 element 1: 1.4 vs reference 1");
  CHECK(compare_values(got, want, 0.01, 0.0, true).pass);  // 0.4 <= 0.01 * 100
  got.values[0][1] = 2.1;                                  // 1.1 > 0.01 * 100
  CHECK_FALSE(compare_values(got, want, 0.01, 0.0, true).pass);
  auto parsed = parse_experiment(kValid + "reference: {rtol: 0.02, relative_to: output}\n", "x.yaml");
  REQUIRE(parsed.ok());
  CHECK(parsed->reference.relative_to == "output");
  CHECK(error_of(kValid + "reference: {relative_to: row}\n") ==
        "x.yaml:10: reference.relative_to: must be element or output, got 'row'");
}

TEST_CASE("tolerances must be finite and not negative: NaN would pass every cell") {
  CHECK(error_of(kValid + "reference: {rtol: .nan}\n") ==
        "x.yaml:10: reference.rtol: must be a finite number >= 0, got nan");
  CHECK(error_of(kValid + "reference: {atol: -1.0e-5}\n") ==
        "x.yaml:10: reference.atol: must be a finite number >= 0, got -1e-05");
  CHECK(error_of(kValid + "reference: {atol: .inf}\n") ==
        "x.yaml:10: reference.atol: must be a finite number >= 0, got inf");
  auto limits = parse_experiment(
      kValid + "limits: {buffer-bytes: 4096, arena-bytes: 8192, memory-bytes: 65536, trace-nodes: 1000}\n", "x.yaml");
  REQUIRE(limits.ok());
  CHECK(limits->limits.buffer_bytes == 4096);
  CHECK(limits->limits.arena_bytes == 8192);
  CHECK(limits->limits.memory_bytes == 65536);
  CHECK(limits->limits.trace_nodes == 1000);
}

TEST_CASE("workload sizes that overflow are refused with the parameters that made them") {
  auto huge = make_workload("softmax", {{"rows", int64_t{1} << 40}, {"cols", int64_t{1} << 40}});
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message ==
        "workload 'softmax' with cols=1099511627776,rows=1099511627776: input 0: f32[1099511627776,1099511627776] has "
        "more than 72057594037927936 bytes (2^56), the most a tensor may have");
  auto beyond = make_workload("chain", {{"n", int64_t{1} << 41}});
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.error().message == "workload 'chain': parameter 'n' must be between 1 and 2^40, got 2199023255552");
}

TEST_CASE("labels, and entries that would make indistinguishable cells") {
  auto e = parse_experiment(
      "name: t\nworkloads: [{name: softmax, params: {rows: 4}}, {name: softmax, params: {rows: 8}, label: big}]\n"
      "pipelines: {p: lower}\nbackends: [{name: cpu, options: threads=1}, {name: cpu, label: all threads}]\n",
      "x.yaml");
  REQUIRE(e.ok());
  CHECK(e->workloads[1].label == "big");
  CHECK(e->backends[1].label == "all threads");
  CHECK(error_of("name: t\nworkloads: [softmax, softmax]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[1]: the same workload and parameters () as the entry on line 2; give one a different "
        "'label', 'params' or 'inputs'");
  CHECK(error_of("name: t\nworkloads: [softmax]\npipelines: {p: lower}\nbackends:\n  - cpu\n"
                 "  - {name: cpu, options: ''}\n") ==
        "x.yaml:6: backends[1]: the same backend and options as the entry on line 5; give one a different 'label' "
        "or different 'options'");
}

TEST_CASE("unknown workloads and parameters are reported when the workload is made") {
  auto unknown = make_workload("chian", {});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find(
            "unknown workload 'chian' (did you mean 'chain'?) (built-in: chain, chain-small, chain-tiny") == 0);
  auto bad_param = make_workload("softmax", {{"colums", 3}});
  REQUIRE_FALSE(bad_param.ok());
  CHECK(bad_param.error().message ==
        "workload 'softmax' has no parameter 'colums' (did you mean 'cols'?) (parameters: cols, rows)");
  auto negative = make_workload("softmax", {{"cols", -3}});
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().message == "workload 'softmax': parameter 'cols' must be between 1 and 2^40, got -3");
  auto missing = make_workload("nowhere.lzir", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "nowhere.lzir: cannot open a workload file");
}

TEST_CASE("a list of parameter values is a sweep; several lists are a grid") {
  auto e = parse_experiment(
      "name: t\nworkloads: [{name: softmax, params: {rows: [8, 64, 512], cols: [32, 64]}}, chain]\n"
      "pipelines: {p: lower}\nbackends: [interp]\n",
      "x.yaml");
  REQUIRE(e.ok());
  REQUIRE(e->workloads.size() == 7);
  std::set<std::pair<int64_t, int64_t>> sizes;
  for (int i = 0; i < 6; ++i) {
    CHECK(e->workloads[i].name == "softmax");
    CHECK(e->workloads[i].line == 2);
    sizes.insert({e->workloads[i].params.at("rows"), e->workloads[i].params.at("cols")});
  }
  CHECK(sizes.size() == 6);
  CHECK(e->workloads[6].name == "chain");
  CHECK(error_of("name: t\nworkloads: [{name: softmax, params: {rows: []}}]\npipelines: {p: lower}\n"
                 "backends: [interp]\n") == "x.yaml:2: workloads[0].params.rows: an empty list sweeps nothing");
  CHECK(error_of("name: t\nworkloads: [{name: softmax, params: {rows: [8, x]}}]\npipelines: {p: lower}\n"
                 "backends: [interp]\n") == "x.yaml:2: workloads[0].params.rows[1]: expected an integer, got 'x'");
  CHECK(error_of("name: t\nworkloads: [{name: softmax, params: {rows: [8, 8]}}]\npipelines: {p: lower}\n"
                 "backends: [interp]\n") ==
        "x.yaml:2: workloads[0]: the same workload and parameters (rows=8) as the entry on line 2; give one a "
        "different 'label', 'params' or 'inputs'");
}

TEST_CASE("a brace list in a pipeline option is one pipeline per value") {
  auto e = parse_experiment(
      "name: t\nworkloads: [chain]\npipelines:\n  base: lower\n"
      "  planned: 'fuse{strategy={none,greedy-elementwise}},lower,plan-memory{algo={naive, linear-scan}}'\n"
      "backends: [interp]\n",
      "x.yaml");
  REQUIRE(e.ok());
  REQUIRE(e->pipelines.size() == 5);
  CHECK(e->pipelines[1].name == "planned[strategy=none,algo=naive]");
  CHECK(e->pipelines[1].text == "fuse{strategy=none},lower,plan-memory{algo=naive}");
  CHECK(e->pipelines[4].name == "planned[strategy=greedy-elementwise,algo=linear-scan]");
  CHECK(e->pipelines[4].text == "fuse{strategy=greedy-elementwise},lower,plan-memory{algo=linear-scan}");
  CHECK(e->pipelines[4].line == 5);
  CHECK(error_of("name: t\nworkloads: [chain]\npipelines: {p: 'fuse{strategy={none}},lower'}\nbackends: [interp]\n"
                 "baseline: p\n") ==
        "x.yaml:5: baseline: 'p' is not one of the pipelines (pipelines: p[strategy=none])");
}

TEST_CASE("--set overrides any key, creating maps on the way") {
  auto e = parse_experiment(kValid, "x.yaml",
                            {{"repeat.runs", "3"},
                             {"workloads[1].params.rows", "[2, 4]"},
                             {"backends", "[cpu, interp]"},
                             {"reference.rtol", "0.5"}});
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  CHECK(e->runs == 3);
  CHECK(e->workloads.size() == 3);
  CHECK(e->workloads[2].params.at("rows") == 4);
  CHECK(e->backends.size() == 2);
  CHECK(e->reference.rtol == 0.5);
  auto plain = parse_experiment(kValid, "x.yaml");
  CHECK(plain->hash != e->hash);  // the overrides are part of what ran
  auto bad_index = parse_experiment(kValid, "x.yaml", {{"workloads[7].name", "chain"}});
  REQUIRE_FALSE(bad_index.ok());
  CHECK(bad_index.error().message == "--set workloads[7].name: no list item [7] there");
  auto bad_value = parse_experiment(kValid, "x.yaml", {{"repeat.runs", "lots"}});
  REQUIRE_FALSE(bad_value.ok());
  CHECK(bad_value.error().message.find("repeat.runs: expected an integer, got 'lots'") != std::string::npos);
  CHECK_FALSE(parse_key_override("repeat.runs").ok());
  CHECK(parse_key_override("a.b=c=d")->value == "c=d");
}

TEST_CASE("duplicate keys and mistyped keys are named") {
  CHECK(error_of(kValid + "seed: 1\nseed: 2\n") == "x.yaml:11: seed: duplicate key (first on line 10)");
  CHECK(error_of(kValid + "repeat: {runs: 2, runs: 3}\n") ==
        "x.yaml:10: repeat.runs: duplicate key (first on line 10)");
  CHECK(error_of(kValid + "repaet: {runs: 2}\n").find("x.yaml:10: repaet: unknown key (did you mean 'repeat'?)") == 0);
}

// Found by the experiment-loader libFuzzer target: a non-scalar key reached
// yaml-cpp's string conversion, which throws.
TEST_CASE("a key that is a list, a mapping or nothing is an error, anywhere") {
  CHECK(error_of(kValid + "[seed]: 1\n") ==
        "x.yaml:10: (top level): a key must be a plain name, not a list, a mapping or nothing");
  CHECK(error_of(kValid + "repeat: {{runs: 1}: 2}\n") ==
        "x.yaml:10: repeat: a key must be a plain name, not a list, a mapping or nothing");
  CHECK(error_of(kValid + "peers: {? : [python3]}\n") ==
        "x.yaml:10: peers: a key must be a plain name, not a list, a mapping or nothing");
  auto by_override = parse_experiment(kValid, "x.yaml", {{"repeat", "{[runs]: 2}"}});
  REQUIRE_FALSE(by_override.ok());
  CHECK(by_override.error().message.find("a key must be a plain name") != std::string::npos);
}

// Found by the experiment-loader libFuzzer target: a backend entry without a
// name threw from yaml-cpp; long or combinatorial sweeps took minutes (a
// recursive std::regex scan) before anything was checked.
TEST_CASE("a backend entry without a name is an error") {
  CHECK(error_of("name: t\nworkloads: [chain-tiny]\npipelines: {p: lower}\nbackends: [{options: threads=1}]\n") ==
        "x.yaml:4: backends[0]: missing 'name' (a backend name or a plugin file)");
}

TEST_CASE("sweeps are bounded and empty lists refused") {
  auto too_many = expand_pipeline_sweep("p",
                                        "fuse{strategy={a,b,c,d,e,f,g,h,i,j}},plan-memory{algo={a,b,c,d,e,f,g,"
                                        "h,i,j}},schedule{order={a,b,c,d,e,f,g,h,i,j}},x{y={1,2,3,4,5,6,7,8,9,10,11}}");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().message == "the sweep expands to more than 10000 pipelines");
  auto empty = expand_pipeline_sweep("p", "fuse{strategy={}}");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message == "'strategy={}' lists no values to sweep");
  auto four = expand_pipeline_sweep("p", "fuse{strategy={a, b}},plan-memory{algo={x,y}}");
  REQUIRE(four.ok());
  REQUIRE(four->size() == 4);
  CHECK((*four)[1].name == "p[strategy=a,algo=y]");
  CHECK((*four)[1].text == "fuse{strategy=a},plan-memory{algo=y}");
  CHECK((*four)[2].name == "p[strategy=b,algo=x]");
  std::string ten = "[1,2,3,4,5,6,7,8,9,10]";
  CHECK(error_of("name: t\nworkloads: [{name: softmax, params: {rows: " + ten + ", cols: " + ten + ", a: " + ten +
                 ", b: " + ten + ", c: [1, 2]}}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0].params: the sweep expands to more than 10000 workloads");
}

// Found by the experiment-loader libFuzzer target: a long mistyped baseline
// against a sweep's thousands of pipeline names took 15 s in "did you mean".
TEST_CASE("did-you-mean suggests for names people type, not for long texts") {
  CHECK(closest_name("linear-scn", {"naive", "linear-scan"}) == "linear-scan");
  std::string long_name(65, 'a'), candidate(65, 'a');
  candidate.back() = 'b';
  CHECK(closest_name(long_name, {candidate}).empty());
  CHECK(closest_name("aaaa", {std::string(65, 'a'), "aaab"}) == "aaab");
}

TEST_CASE("plugins are paths relative to the experiment file, loaded later by the runner") {
  auto parsed = parse_experiment(kValid + "plugins: [lib/capped.so, /opt/x.so]\n", "dir/x.yaml");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->plugins.size() == 2);
  CHECK(parsed->plugins[0].path == "dir/lib/capped.so");
  CHECK(parsed->plugins[1].path == "/opt/x.so");
  CHECK(parsed->plugins[0].line == 10);
}

TEST_CASE("train: a workload as a training step, with a loss and an optimizer from the lists; mistakes named") {
  auto e = parse_experiment(
      "name: t\nworkloads: [mlp, {name: mlp, train: {}}, {name: mlp, train: {loss: cross-entropy, optimizer: sgd}}]\n"
      "pipelines: {p: lower}\nbackends: [interp]\n",
      "x.yaml");
  REQUIRE(e.ok());
  CHECK(e->workloads[0].train_loss.empty());
  CHECK(e->workloads[1].train_loss == "mse");
  CHECK(e->workloads[1].train_optimizer == "adamw");
  CHECK(e->workloads[2].train_loss == "cross-entropy");
  CHECK(e->workloads[2].train_optimizer == "sgd");
  CHECK(error_of("name: t\nworkloads: [{name: mlp, train: {loss: hinge}}]\npipelines: {p: lower}\nbackends: "
                 "[interp]\n") == "x.yaml:2: workloads[0].train.loss: 'hinge': expected one of cross-entropy, mse");
  CHECK(error_of("name: t\nworkloads: [{name: mlp, train: {optimiser: sgd}}]\npipelines: {p: lower}\nbackends: "
                 "[interp]\n")
            .find("workloads[0].train.optimiser: unknown key (did you mean 'optimizer'?)") != std::string::npos);
  CHECK(error_of("name: t\nworkloads: [{torch: a.py, train: {}}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0].train: a PyTorch program ('torch') is a training step already");
  CHECK(error_of("name: t\nworkloads: [{name: mlp, train: sgd}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0].train: expected a mapping: {loss: cross-entropy|mse, optimizer: sgd|adamw}");
}

TEST_CASE("inputs stored in bf16 or f16: one workload listed with each, other values are refused") {
  auto e = parse_experiment(
      "name: t\nworkloads: [mlp, {name: mlp, inputs: bf16}, {name: mlp, inputs: f16}]\npipelines: {p: lower}\n"
      "backends: [interp]\n",
      "x.yaml");
  REQUIRE(e.ok());
  CHECK(e->workloads[0].inputs.empty());
  CHECK(e->workloads[1].inputs == "bf16");
  CHECK(e->workloads[2].inputs == "f16");
  CHECK(error_of("name: t\nworkloads: [{name: mlp, inputs: f64}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0].inputs: 'f64': the f32 inputs are stored in bf16 or f16");
  CHECK(error_of("name: t\nworkloads: [{torch: a.py, inputs: bf16}]\npipelines: {p: lower}\nbackends: [interp]\n") ==
        "x.yaml:2: workloads[0].inputs: stores a workload's inputs; a PyTorch program makes its own");
  CHECK(error_of("name: t\nworkloads: [{name: mlp, inputs: bf16}, {name: mlp, inputs: bf16}]\npipelines: {p: "
                 "lower}\nbackends: [interp]\n")
            .find("the same workload and parameters") != std::string::npos);
}

TEST_CASE(
    "a workload's inputs stored in bf16: its f32 program over the rounded values, products reading them as "
    "stored") {
  const WorkloadParams small{{"batch", 4}, {"d", 8}, {"hidden", 16}};
  auto inner = make_builtin_workload("mlp", small);
  auto made = make_builtin_workload("mlp", small);
  REQUIRE(inner.ok());
  REQUIRE(made.ok());
  std::unique_ptr<Workload> stored = with_inputs_stored_in(std::move(*made), DType::BF16);
  std::vector<HostTensor> rounded = stored->make_inputs(5), exact = (*inner)->make_inputs(5);
  REQUIRE(rounded.size() == exact.size());
  REQUIRE(stored->input_types().size() == exact.size());
  std::vector<std::vector<float>> widened;
  for (size_t i = 0; i < exact.size(); ++i) {
    CHECK(stored->input_types()[i] == rounded[i].type);
    CHECK(rounded[i].type == TensorType{DType::BF16, exact[i].type.shape});
    const auto* from = reinterpret_cast<const float*>(exact[i].data->data());
    const auto* got = reinterpret_cast<const BFloat16*>(rounded[i].data->data());
    std::vector<float> values(static_cast<size_t>(exact[i].type.num_elements()));
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = static_cast<float>(got[k]);
      REQUIRE(got[k].bits == BFloat16(from[k]).bits);
    }
    widened.push_back(std::move(values));
  }
  // The step is the f32 program's over the widened values, bit for bit.
  Session session;
  std::vector<Tensor> bf16_inputs = bind_inputs(session.ctx, rounded), f32_inputs;
  for (size_t i = 0; i < widened.size(); ++i)
    f32_inputs.push_back(session.ctx.from_vector(widened[i], exact[i].type.shape));
  std::vector<Tensor> got = stored->step(session.ctx, bf16_inputs), want = (*inner)->step(session.ctx, f32_inputs);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < want.size(); ++o) CHECK(values(got[o]) == values(want[o]));
  // Under autocast each product reads its weight as stored: no cast of it;
  // a bias is broadcast as stored and widened where it is added.
  Context capture;
  std::vector<Tensor> outputs = stored->step(capture, bind_inputs(capture, rounded));
  Module module;
  module.graph = capture.capture();
  REQUIRE(run_pipeline(pipeline("autocast,decompose,canonicalize,cse,dce"), module).ok());
  int products = 0;
  for (NodeId id = 0; id < module.graph.size(); ++id) {
    const Node& node = module.graph.node(id);
    if (node.op != OpId::Matmul) continue;
    ++products;
    CHECK(node.type.dtype == DType::BF16);
    CHECK(module.graph.node(node.operands[1]).op == OpId::Parameter);
  }
  CHECK(products == 2);
  for (NodeId id = 0; id < module.graph.size(); ++id)
    if (module.graph.node(id).op == OpId::Broadcast)
      CHECK(module.graph.node(module.graph.node(id).operands[0]).op != OpId::Cast);
}

TEST_CASE("every experiment in experiments/ loads") {
  namespace fs = std::filesystem;
  int loaded = 0;
  for (const fs::directory_entry& file : fs::directory_iterator(fs::path(LAZYLAB_REPORT_SCHEMA).parent_path())) {
    if (file.path().extension() != ".yaml") continue;
    CAPTURE(file.path().string());
    auto experiment = load_experiment(file.path().string());
    CHECK_MESSAGE(experiment.ok(), (experiment.ok() ? "" : experiment.error().message));
    ++loaded;
  }
  CHECK(loaded >= 10);
}
