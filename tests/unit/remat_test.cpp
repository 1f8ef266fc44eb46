// Rematerialization strategies (core/remat_strategy.h, remat{strategy=...}):
// what each keeps for the backward of the training workloads, the minimum
// cut keeping the fewest bytes, and a bad root an error. That each computes
// what the joint graph computes: differential_test runs every workload
// through every strategy.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "core/op_info.h"
#include "core/pass_manager.h"
#include "core/remat_strategy.h"
#include "runner/workload.h"
#include "support.h"

namespace lazylab::testing {
namespace {

// A training workload's joint graph, decomposed and cleaned as pipelines do.
Graph joint_graph(const std::string& name, const WorkloadParams& params) {
  auto workload = make_builtin_workload(name, params);
  REQUIRE(workload.ok());
  Context ctx;
  std::vector<Tensor> outputs = (*workload)->step(ctx, bind_inputs(ctx, (*workload)->make_inputs(1)));
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline("decompose,canonicalize,cse,dce"), module).ok());
  return std::move(module.graph);
}

// The bytes the forward keeps for the backward after `strategy`.
uint64_t kept_bytes(const Graph& joint, const std::string& strategy) {
  Module module;
  module.graph = joint;
  REQUIRE(run_pipeline(pipeline("remat{strategy=" + strategy + "}"), module).ok());
  auto split = split_joint(module.graph, 0);
  REQUIRE(split.ok());
  uint64_t bytes = 0;
  for (NodeId id : split->saved)  // a constant aside: fusion folds it into its readers, no memory holds it
    if (module.graph.node(id).op != OpId::Constant) bytes += module.graph.node(id).type.bytes();
  return bytes;
}

// The estimated peak (remat_schedule) of a rematerialized graph: its own
// nodes in order, nothing more to recompute.
uint64_t estimated_peak(const Graph& graph) {
  auto split = split_joint(graph, 0);
  REQUIRE(split.ok());
  return remat_schedule(graph, *split, std::vector<bool>(graph.size(), false)).peak_bytes;
}

// The training workloads at sizes small enough for a unit test.
const std::pair<const char*, WorkloadParams> kTrainingSteps[] = {
    {"mlp-train", {{"batch", 16}, {"d", 8}, {"hidden", 32}}},
    {"gpt2-block-train", {{"batch", 2}, {"seq", 8}, {"channels", 16}, {"heads", 2}}}};

}  // namespace

TEST_CASE("the minimum cut keeps fewer bytes than saving all, and computes no product's operand again") {
  for (const auto& [workload, params] : kTrainingSteps) {
    const std::string name = workload;
    CAPTURE(name);
    Graph joint = joint_graph(name, params);
    uint64_t all = kept_bytes(joint, "save-all"), cheap = kept_bytes(joint, "recompute-cheap"),
             cut = kept_bytes(joint, "min-cut");
    // gpt2-block-train's layernorms and softmax are computed again; mlp-train
    // keeps gelu's input and output, both read by the backward's products.
    CHECK(cut <= all);
    CHECK((cut < all) == (name == "gpt2-block-train"));
    CHECK(cheap < all);  // the gelu's, layernorm's and softmax's elementwise steps are not kept
    MESSAGE(name << ": kept bytes save-all " << all << ", recompute-cheap " << cheap << ", min-cut " << cut);
    // A value the backward multiplies (through transposes and reshapes) is
    // kept: computed again it would be written out in full anyway. Not so
    // for recompute-cheap, which computes gelu's output again for w2's
    // gradient.
    auto split = split_joint(joint, 0);
    REQUIRE(split.ok());
    std::vector<std::vector<NodeId>> backward_users(joint.size());
    for (NodeId id = 0; id < joint.size(); ++id)
      if (split->live[id] && !split->forward[id])
        for (NodeId operand : joint.node(id).operands) backward_users[operand].push_back(id);
    auto multiplied_in_backward = [&](NodeId id) {
      std::vector<NodeId> work{id};
      while (!work.empty()) {
        NodeId value = work.back();
        work.pop_back();
        for (NodeId user : backward_users[value]) {
          if (joint.node(user).op == OpId::Matmul) return true;
          if (op_info(joint.node(user).op).category == OpCategory::Layout) work.push_back(user);
        }
      }
      return false;
    };
    for (const auto& [strategy, none_multiplied] : {std::pair{"min-cut", true}, std::pair{"recompute-cheap", false}}) {
      CAPTURE(strategy);
      auto again = RematStrategyRegistry::global().find(strategy)->create({})->recompute(joint, *split);
      REQUIRE(again.ok());
      int multiplied = 0;
      for (NodeId id = 0; id < joint.size(); ++id) multiplied += (*again)[id] && multiplied_in_backward(id);
      CHECK((multiplied == 0) == none_multiplied);
    }
  }
}

TEST_CASE("memory-budget recomputes until the estimated peak fits, and names a budget it cannot reach") {
  for (const auto& [workload, params] : kTrainingSteps) {
    const std::string name = workload;
    CAPTURE(name);
    Graph joint = joint_graph(name, params);
    const uint64_t saving_all = estimated_peak(joint);
    CHECK(kept_bytes(joint, "memory-budget,percent=100") == kept_bytes(joint, "save-all"));
    CHECK(kept_bytes(joint, "memory-budget,percent=9223372036854775807") == kept_bytes(joint, "save-all"));
    uint64_t lowest = saving_all;
    for (int percent : {90, 80, 70, 60, 50}) {
      Module module;
      module.graph = joint;
      auto ran = run_pipeline(pipeline(fmt::format("remat{{strategy=memory-budget,percent={}}}", percent)), module);
      if (!ran.ok()) {
        CHECK(ran.error().message.find("is below the lowest peak it reaches") != std::string::npos);
        break;
      }
      uint64_t peak = estimated_peak(module.graph);
      CHECK(peak <= saving_all * percent / 100);
      lowest = peak;
      MESSAGE(name << ": memory-budget percent=" << percent << " peak " << peak << " of save-all's " << saving_all);
    }
    CHECK(lowest <= saving_all * 80 / 100);  // a fifth off at least, by recomputing
    Module module;
    module.graph = joint;
    auto unreachable = run_pipeline(pipeline("remat{strategy=memory-budget,bytes=1}"), module);
    REQUIRE_FALSE(unreachable.ok());
    CHECK(unreachable.error().message.find("a budget of 1 bytes is below the lowest peak it reaches") !=
          std::string::npos);
  }
}

TEST_CASE("remat names a loss root the graph lacks, and leaves a forward alone") {
  Context ctx;
  Tensor x = ctx.placeholder(TensorType{DType::F32, {4}});
  Tensor y = exp(x) * 2.0;
  Module module;
  module.graph = ctx.capture();
  auto bad = run_pipeline(pipeline("remat{strategy=min-cut,of=1}"), module);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("the loss is root 1, but the graph has 1 root") != std::string::npos);
  for (const char* strategy : {"save-all", "recompute-cheap", "min-cut", "memory-budget"}) {
    Module forward;
    forward.graph = module.graph;
    auto ran = run_pipeline(pipeline(std::string("remat{strategy=") + strategy + "}"), forward);
    REQUIRE(ran.ok());
    CHECK(forward.graph.size() == module.graph.size());  // no backward: nothing to keep or recompute
  }
}

}  // namespace lazylab::testing
