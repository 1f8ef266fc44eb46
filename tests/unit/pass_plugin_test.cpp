// Pass and strategy plugins: loading, options of their own, provenance in
// the fingerprint, and the refusals (API version, entry point, names taken).
#include <fmt/format.h>

#include <algorithm>

#include "core/pass_manager.h"
#include "core/pass_plugin.h"
#include "core/text_format.h"
#include "support.h"

using namespace lazylab;

namespace {

const std::string kPluginDir = LAZYLAB_TEST_PLUGIN_DIR;

std::string load_error(const std::string& path) {
  auto loaded = load_pass_plugin(path);
  REQUIRE_FALSE(loaded.ok());
  return loaded.error().message;
}

// A chain of six elementwise ops over one shape.
Module chain_module() {
  auto parsed = parse_graph(R"(graph @g {
  %0 = parameter {ordinal = 0} : f32[16]
  %1 = exp(%0) : f32[16]
  %2 = neg(%1) : f32[16]
  %3 = tanh(%2) : f32[16]
  %4 = abs(%3) : f32[16]
  %5 = sqrt(%4) : f32[16]
  %6 = exp(%5) : f32[16]
  return %6
})");
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
  Module module;
  module.graph = std::move(parsed->graph);
  return module;
}

size_t kernels_after(const std::string& pipeline_text) {
  Module module = chain_module();
  auto pipeline = parse_pipeline(pipeline_text);
  REQUIRE_MESSAGE(pipeline.ok(), (pipeline.ok() ? "" : pipeline.error().message));
  REQUIRE(run_pipeline(*pipeline, module, {}).ok());
  return module.program->kernels.size();
}

}  // namespace

TEST_CASE("a strategy plugin registers a strategy with typed options of its own") {
  auto loaded = load_pass_plugin(LAZYLAB_CAPPED_STRATEGY_PLUGIN);
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  CHECK(loaded->name == "capped-strategy");
  CHECK(loaded->registered == std::vector<std::pair<std::string, std::string>>{{"fusion strategy", "capped"}});
  // Loading it again is a no-op.
  REQUIRE(load_pass_plugin(LAZYLAB_CAPPED_STRATEGY_PLUGIN).ok());
  CHECK(std::count_if(loaded_pass_plugins().begin(), loaded_pass_plugins().end(),
                      [](const LoadedPlugin& p) { return p.name == "capped-strategy"; }) == 1);

  auto capped = parse_pipeline("fuse{strategy=capped,max-ops=2},lower");
  REQUIRE(capped.ok());
  CHECK(capped->canonical == "fuse{max-ops=2,strategy=capped},lower");
  CHECK(capped->provenance == std::vector<std::string>{"plugin capped-strategy 1.0"});
  CHECK(parse_pipeline("fuse{strategy=capped},lower")->canonical == "fuse{max-ops=8,strategy=capped},lower");
  // Another value, another fingerprint; built-ins keep theirs.
  CHECK(capped->fingerprint != parse_pipeline("fuse{strategy=capped,max-ops=3},lower")->fingerprint);
  CHECK(parse_pipeline("fuse{strategy=none},lower")->provenance.empty());

  // Six elementwise ops: kernels of at most two, three or six ops.
  CHECK(kernels_after("fuse{strategy=capped,max-ops=2},lower") == 3);
  CHECK(kernels_after("fuse{strategy=capped,max-ops=4},lower") == 2);
  CHECK(kernels_after("fuse{strategy=capped,max-ops=100},lower") == 1);
  CHECK(kernels_after("fuse{strategy=greedy-elementwise},lower") == 1);
}

TEST_CASE("a strategy's options are checked like the pass's own") {
  REQUIRE(load_pass_plugin(LAZYLAB_CAPPED_STRATEGY_PLUGIN).ok());
  auto typo = parse_pipeline("fuse{strategy=capped,max-opz=2},lower");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().message.find("pass 'fuse' has no option 'max-opz' (did you mean 'max-ops'?)") !=
        std::string::npos);
  auto low = parse_pipeline("fuse{strategy=capped,max-ops=0},lower");
  REQUIRE_FALSE(low.ok());
  CHECK(low.error().message.find("option 'max-ops' must be at least 1, got 0") != std::string::npos);
  // Another strategy does not take capped's options.
  auto elsewhere = parse_pipeline("fuse{strategy=none,max-ops=2},lower");
  REQUIRE_FALSE(elsewhere.ok());
  CHECK(elsewhere.error().message.find("has no option 'max-ops'") != std::string::npos);
}

TEST_CASE("plugins for another API version, without the entry point or with taken names are refused") {
  CHECK(load_error(kPluginDir + "/lazylab-pass-wrong-api.so")
            .find(fmt::format("it was built for pass plugin API {}, this lazylab speaks {}",
                              LAZYLAB_PASS_PLUGIN_API_VERSION + 41, LAZYLAB_PASS_PLUGIN_API_VERSION)) !=
        std::string::npos);
  CHECK(load_error(LAZYLAB_EXAMPLE_PLUGIN).find("missing entry point 'lazylab_pass_plugin_info'") != std::string::npos);
  CHECK(load_error(kPluginDir + "/lazylab-pass-no-name.so").find("lacks a name") != std::string::npos);
  CHECK(load_error(kPluginDir + "/no-such-plugin.so").find("no such file") != std::string::npos);
  std::string duplicate = load_error(kPluginDir + "/lazylab-pass-duplicate.so");
  CHECK(duplicate.find("it registers pass 'cse', which a built-in provides already; nothing of it was registered") !=
        std::string::npos);
  // All or nothing: the plugin's other, free name was not registered either.
  CHECK(FusionStrategyRegistry::global().find("fresh-from-bad-plugin") == nullptr);
}

TEST_CASE("a plugin's scheduler and memory planner are selected like the built-ins, and checked") {
  auto loaded = load_pass_plugin(kPluginDir + "/lazylab-pass-orders.so");
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  CHECK(loaded->registered ==
        std::vector<std::pair<std::string, std::string>>{{"scheduler", "reversed"}, {"memory planner", "spaced"}});
  // Its planner's option and provenance.
  auto spaced = parse_pipeline("lower,plan-memory{algo=spaced,gap=256}");
  REQUIRE(spaced.ok());
  CHECK(spaced->canonical == "lower,plan-memory{algo=spaced,gap=256}");
  CHECK(spaced->provenance == std::vector<std::string>{"plugin orders 0.1"});
  Module module = chain_module();
  REQUIRE(run_pipeline(*parse_pipeline("fuse{strategy=none},lower,plan-memory{algo=spaced,gap=256}"), module, {}).ok());
  // Five arena values (the sixth op writes the output), 64 bytes each, 256 apart.
  CHECK(module.program->arena_bytes == 4 * (64 + 256) + 64);
  // The pass checks a scheduler's order: reversing a chain runs readers first.
  Module reversed = chain_module();
  auto ran = run_pipeline(*parse_pipeline("fuse{strategy=none},lower,schedule{order=reversed}"), reversed, {});
  REQUIRE_FALSE(ran.ok());
  CHECK(ran.error().message.find(
            "scheduler 'reversed': kernel 1 would run before kernel 0, which produces its input") != std::string::npos);
}
