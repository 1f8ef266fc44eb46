// Loading backend plugins: every failure is a clear error naming the file.
#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "attention_variants.h"
#include "core/backend_options.h"
#include "core/pass_manager.h"
#include "support.h"

using namespace lazylab;

namespace {

std::string load_error(const std::string& name, const std::string& options = "") {
  auto backend = load_backend(name, options);
  REQUIRE_FALSE(backend.ok());
  return backend.error().message;
}

const std::string kDir = LAZYLAB_TEST_PLUGIN_DIR;

}  // namespace

TEST_CASE("the interpreter loads by name from the build tree") {
  auto backend = load_backend("interp");
  REQUIRE(backend.ok());
  CHECK((*backend)->name() == "interp");
  CHECK((*backend)->capabilities().supports_op[LAZYLAB_OP_Add]);
  CHECK_FALSE((*backend)->capabilities().supports_op[LAZYLAB_OP_Parameter]);
}

TEST_CASE("the cpu backend measures the host's ceilings through the ABI; others say they do not") {
  auto cpu = load_backend("cpu");
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  REQUIRE((*cpu)->measures_host());
  auto quick = (*cpu)->measure_host_ceilings(true);
  REQUIRE_MESSAGE(quick.ok(), (quick.ok() ? "" : quick.error().message));
  CHECK(quick->copy_gb_s > 0);
  CHECK(quick->gemm_gflop_s > 0);
  REQUIRE(quick->peer_environment.size() == 1);
  CHECK(quick->peer_environment[0].rfind("OPENBLAS_CORETYPE=", 0) == 0);
  auto interp = load_backend("interp");
  REQUIRE(interp.ok());
  CHECK_FALSE((*interp)->measures_host());
  auto none = (*interp)->measure_host_ceilings(true);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "backend interp does not measure the host's ceilings (that needs ABI 3.12)");
}

TEST_CASE("a missing plugin names the file it looked for and where") {
  std::string message = load_error("nonexistent");
  CHECK(message.find("backend 'nonexistent': no lazylab-backend-nonexistent.so in the plugin path [") == 0);
  CHECK(load_error("/no/such/dir/lazylab-backend-x.so") ==
        "backend plugin /no/such/dir/lazylab-backend-x.so: no such file");
}

TEST_CASE("a wrong ABI major version is refused") {
  std::string path = kDir + "/lazylab-backend-wrongabi.so";
  CHECK(load_error(path) ==
        fmt::format("backend plugin {}: it was built for plugin ABI 1.0, this lazylab speaks {}.{}; rebuild it", path,
                    LAZYLAB_ABI_MAJOR, LAZYLAB_ABI_MINOR));
}

TEST_CASE("a plugin built for ABI 3.0 runs the ops it knows and a newer op is refused by name") {
  auto older = load_backend(lazylab::testing::test_backend_plugin("olderminor"));
  REQUIRE_MESSAGE(older.ok(), (older.ok() ? "" : older.error().message));
  const lazylab_capabilities& caps = (*older)->capabilities();
  CHECK(caps.num_ops == LAZYLAB_OP_COUNT);
  CHECK(caps.supports_op[LAZYLAB_OP_Gelu]);
  CHECK_FALSE(caps.supports_op[LAZYLAB_OP_Erf]);  // appended in 3.1
  Engine engine(lazylab::testing::pipeline("lower"), **older);
  Context ctx(engine);
  Tensor x = ctx.from_vector<float>({0.5f}, {1});
  CHECK(lazylab::testing::values(tanh(x))[0] == doctest::Approx(std::tanh(0.5)));
  Tensor y = erf(x);
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("backend olderminor cannot run op 'erf'") == 0);
  // generated_code came in 3.2: the host says so rather than calling it.
  Context capture;
  Tensor captured = tanh(capture.from_vector<float>({0.5f}, {1}));
  Module module;
  module.graph = capture.capture();
  REQUIRE(run_pipeline(lazylab::testing::pipeline("lower"), module).ok());
  auto code = (*older)->generated_code(*module.program, module.graph);
  REQUIRE_FALSE(code.ok());
  CHECK(code.error().message ==
        "backend olderminor (plugin ABI 3.0) cannot show its generated code: that needs ABI 3.2");
}

TEST_CASE("a plugin of an older ABI runs the five dtypes before 3.13; another dtype is refused by name") {
  auto older = load_backend(lazylab::testing::test_backend_plugin("olderminor"));
  REQUIRE(older.ok());
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    CHECK((*older)->runs_dtype(dtype) == (dtype_id(dtype) <= LAZYLAB_BOOL));
  }
  Engine engine(lazylab::testing::pipeline("lower"), **older);
  Context ctx(engine);
  Tensor x = cast(ctx.from_vector<float>({0.5f, 3.0f}, {2}), DType::BF16);
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("backend olderminor does not compute in bf16 (%1 = cast(%0) : bf16[2])") == 0);
  // The shipped host backends run every dtype of the table.
  for (const char* name : {"interp", "cpu"}) {
    auto backend = load_backend(name);
    REQUIRE(backend.ok());
    for (DType dtype : kAllDTypes) CHECK((*backend)->runs_dtype(dtype));
  }
}

TEST_CASE("a host that knows fewer ops than the plugin gets only its own entries") {
  // As a 3.0 host would call a 3.1 plugin: 39 entries, and a guard after them.
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  void* handle = dlopen((*cpu)->path().c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle);
  auto entry = reinterpret_cast<lazylab_backend_entry_fn>(dlsym(handle, LAZYLAB_BACKEND_ENTRY));
  REQUIRE(reinterpret_cast<void*>(entry) != nullptr);
  const lazylab_backend_api* api = entry(3, 0);
  char* error = nullptr;
  lazylab_backend* backend = api->create("", &error);
  REQUIRE(backend);
  constexpr uint32_t kOlderCount = LAZYLAB_OP_Gelu + 1;
  std::vector<uint8_t> table(kOlderCount + 8, 0xAB);
  std::fill(table.begin(), table.begin() + kOlderCount, 0);
  lazylab_capabilities caps{};
  caps.struct_size = sizeof caps;
  caps.num_ops = kOlderCount;
  caps.supports_op = table.data();
  api->capabilities(backend, &caps);
  CHECK(caps.num_ops == kOlderCount);
  CHECK(caps.supports_op == table.data());
  CHECK(table[LAZYLAB_OP_Add] == 1);
  CHECK(table[LAZYLAB_OP_Softmax] == 0);
  for (uint32_t i = kOlderCount; i < table.size(); ++i) CHECK(table[i] == 0xAB);
  CHECK(caps.fuses_elementwise == 1);
  api->destroy(backend);
  dlclose(handle);
}

TEST_CASE("a shared object without the entry point is refused") {
  std::string path = kDir + "/lazylab-backend-noentry.so";
  CHECK(load_error(path) ==
        "backend plugin " + path + ": missing entry point 'lazylab_backend_entry' (not a lazylab backend plugin?)");
}

TEST_CASE("LAZYLAB_PLUGIN_PATH is searched first") {
  setenv("LAZYLAB_PLUGIN_PATH", kDir.c_str(), 1);
  auto backend = load_backend("failing");
  unsetenv("LAZYLAB_PLUGIN_PATH");
  REQUIRE(backend.ok());
  CHECK((*backend)->name() == "failing");
}

TEST_CASE("the example plugin agrees with the interpreter and declines what it lacks") {
  auto example = load_backend(LAZYLAB_EXAMPLE_PLUGIN);
  REQUIRE_MESSAGE(example.ok(), (example.ok() ? "" : example.error().message));
  CHECK((*example)->name() == "example");
  auto program = [](Context& ctx) {
    Tensor x = ctx.from_vector<float>({-1.0f, 0.5f, 2.0f}, {3});
    return sigmoid(relu(x * 3.0 - 1.0) + tanh(x));
  };
  lazylab::testing::Session reference;
  Engine engine(lazylab::testing::pipeline("canonicalize,cse,dce,fuse,lower"), **example);
  Context ctx(engine);
  auto want = lazylab::testing::values(program(reference.ctx));
  auto got = lazylab::testing::values(program(ctx));
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  Tensor reduced = sum(ctx.from_vector<float>({1, 2}, {2}));
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.find("backend example cannot run op 'reduce_sum'") == 0);
}

TEST_CASE("an op the backend does not declare is refused before compiling") {
  auto backend = load_backend(kDir + "/lazylab-backend-failing.so");
  REQUIRE(backend.ok());
  CHECK_FALSE((*backend)->capabilities().supports_op[LAZYLAB_OP_Softmax]);
  Engine engine(lazylab::testing::pipeline("lower"), **backend);
  Context ctx(engine);
  Tensor y = softmax(ctx.from_vector<float>({1, 2}, {1, 2}), -1);
  Status status = ctx.sync();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message ==
        "backend failing cannot run op 'softmax' (%1 = softmax(%0) {axis = 1} : f32[1,2]); add 'decompose' to the "
        "pipeline");
}

// A backend that runs attention kernels in f32 with the causal mask only
// (before ABI 3.15) gets neither a 16-bit one nor one reading its mask from
// memory: fusion refuses each, naming the capability.
TEST_CASE("flash-attention leaves 16-bit and memory-masked attention to backends that declare them") {
  std::vector<uint8_t> ops(kNumOps, 1);
  lazylab_capabilities caps{};
  caps.struct_size = sizeof caps;
  caps.num_ops = kNumOps;
  caps.supports_op = ops.data();
  caps.attention_max_head_dim = 128;
  struct Case {
    int variant;
    const char* pipeline;
    std::string refusal;
  };
  for (const Case& c : {Case{4, "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower",
                             "backend runs attention kernels with a causal mask or none, not one read from memory"},
                        Case{0, "autocast,decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower",
                             "backend runs attention kernels in f32, not bf16"}}) {
    CAPTURE(c.variant);
    Context ctx;
    std::vector<Tensor> outputs =
        lazylab::testing::attention_variant(ctx, c.variant, lazylab::testing::AttentionShape{{2, 5, 8}, 5, 8});
    Module module;
    module.graph = ctx.capture();
    module.capabilities = &caps;
    REQUIRE(run_pipeline(lazylab::testing::pipeline(c.pipeline), module).ok());
    int refused = 0, attention = 0;
    for (const FusionCandidate& candidate : module.fusion_log)
      if (!candidate.decision && candidate.decision.reason == c.refusal) ++refused;
    for (const Kernel& kernel : module.program->kernels)
      if (kernel.description.kind == KernelKind::Attention) ++attention;
    // Variant 4's unmasked attention is an f32 one with no mask: fused.
    CHECK(refused == (c.variant == 4 ? 1 : 2));
    CHECK(attention == (c.variant == 4 ? 1 : 0));
  }
}

// A Program fused without the backend's capabilities (as a pass pipeline run
// on its own does) holds an attention kernel; a backend that declares none
// gets an error naming the kernel, not the kernel.
TEST_CASE("an attention kernel is refused before compiling by a backend that runs none") {
  auto backend = load_backend(kDir + "/lazylab-backend-failing.so");
  REQUIRE(backend.ok());
  CHECK((*backend)->capabilities().attention_max_head_dim == 0);
  Context ctx;
  std::vector<Tensor> outputs =
      lazylab::testing::attention_variant(ctx, 0, lazylab::testing::AttentionShape{{2, 5, 4}, 5, 4});
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(lazylab::testing::pipeline("decompose,fuse{strategy=flash-attention},lower,plan-memory"), module)
              .ok());
  auto executable = (*backend)->compile(*module.program, module.graph);
  REQUIRE_FALSE(executable.ok());
  CHECK(executable.error().message.find("backend failing cannot run the attention kernel ending at %") !=
        std::string::npos);
  CHECK(executable.error().message.find("(head dims 4 and 4; it runs none)") != std::string::npos);
}

// Heads split from their projections (BERT's layouts): a backend that reads
// attention operands only row-major (before ABI 3.16's attention_views, as
// cpu) gets the layouts as copies of their own, and the host refuses it an
// attention kernel fused without its capabilities that reads through them.
TEST_CASE("attention reads through the layouts around it only on backends that declare views") {
  auto cpu = load_backend("cpu");
  REQUIRE(cpu.ok());
  REQUIRE_FALSE((*cpu)->capabilities().attention_views);
  auto graph = [] {
    Context ctx;
    Tensor out = lazylab::testing::attention_heads(ctx, false, false, lazylab::testing::HeadsShape{1, 6, 2, 8});
    return ctx.capture();
  };
  auto through_views = [](const Module& module) {
    int views = 0, layouts = 0;
    for (const Kernel& kernel : module.program->kernels) {
      views += kernel.description.kind == KernelKind::Attention && kernel.description.attention.through_views;
      layouts += kernel.description.kind == KernelKind::Layout;
    }
    return std::pair{views, layouts};
  };
  const std::string fused = "decompose,canonicalize,cse,dce,fuse{strategy=flash-attention},lower,plan-memory";
  Module for_cpu;
  for_cpu.graph = graph();
  for_cpu.capabilities = &(*cpu)->capabilities();
  REQUIRE(run_pipeline(lazylab::testing::pipeline(fused), for_cpu).ok());
  CHECK(through_views(for_cpu) == std::pair{0, 4});
  CHECK((*cpu)->compile(*for_cpu.program, for_cpu.graph).ok());
  Module unlimited;
  unlimited.graph = graph();
  REQUIRE(run_pipeline(lazylab::testing::pipeline(fused), unlimited).ok());
  CHECK(through_views(unlimited) == std::pair{1, 0});
  auto executable = (*cpu)->compile(*unlimited.program, unlimited.graph);
  REQUIRE_FALSE(executable.ok());
  CHECK(executable.error().message.find("through the layout ops around it (ABI 3.16's attention_views)") !=
        std::string::npos);
}

TEST_CASE("bad backend options, compile failures and execute failures come back as errors") {
  // interp declares none: its create() (plugin::BackendOptions) refuses any.
  CHECK(load_error("interp", "threads=4") == "backend plugin " + load_backend("interp").value()->path() +
                                                 ": create: backend 'interp' has no option 'threads' (options: none)");
  CHECK(load_error("interp", "garbage").find("option 'garbage' is not name=value") != std::string::npos);
  CHECK(load_error("cpu", "garbage") == "backend 'cpu': option 'garbage' is not name=value");
  for (bool fail_compile : {true, false}) {
    auto backend = load_backend(kDir + "/lazylab-backend-failing.so", fail_compile ? "fail-compile=1" : "");
    REQUIRE(backend.ok());
    Engine engine(lazylab::testing::pipeline("lower"), **backend);
    Context ctx(engine);
    Tensor y = ctx.from_vector<float>({1}, {1}) + 1.0;
    Status status = ctx.sync();
    REQUIRE_FALSE(status.ok());
    if (fail_compile)
      CHECK(status.error().message == "backend failing: compile: kernel for op 1 failed to compile");
    else
      CHECK(status.error().message == "backend failing: execute: device on fire");
    CHECK_FALSE(y.ok());
  }
}

TEST_CASE("a folder on the plugin path twice, or also the build tree, lists each backend once") {
  std::string twice = kDir + ":" + kDir + "/.:" + kDir;
  setenv("LAZYLAB_PLUGIN_PATH", twice.c_str(), 1);
  std::vector<BackendListing> listings = find_backend_plugins();
  unsetenv("LAZYLAB_PLUGIN_PATH");
  std::map<std::string, int> seen;
  for (const BackendListing& listing : listings) ++seen[listing.name];
  for (const auto& [name, count] : seen) CHECK_MESSAGE(count == 1, name);
  CHECK(seen.count("failing") == 1);
  CHECK(seen.count("interp") == 1);
}

TEST_CASE("a NULL string from a plugin is an error naming the plugin and the entry") {
  std::string path = kDir + "/lazylab-backend-nulldevice.so";
  CHECK(load_error(path) == "backend plugin " + path + ": device_description returned NULL");
}

TEST_CASE("only the backends lazylab ships, in its own plugin folder, count as shipped") {
  auto interp = find_backend_file("interp");
  REQUIRE(interp.ok());
  CHECK(is_shipped_backend(*interp));
  auto cpu = find_backend_file("cpu");
  REQUIRE(cpu.ok());
  CHECK(is_shipped_backend(*cpu));
  CHECK_FALSE(is_shipped_backend(kDir + "/lazylab-backend-failing.so"));
  // The same file under another folder is a third-party plugin.
  std::filesystem::path copy = std::filesystem::temp_directory_path() / "lazylab-shipped-test";
  std::filesystem::create_directories(copy);
  std::filesystem::copy_file(*interp, copy / "lazylab-backend-interp.so",
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_FALSE(is_shipped_backend((copy / "lazylab-backend-interp.so").string()));
  std::filesystem::remove_all(copy);
}

TEST_CASE("a backend's declared options are checked, spelled out in order, and listed") {
  lazylab_option_spec specs[] = {
      {"size", LAZYLAB_OPTION_INT, "8", "a size", nullptr, 1},
      {"mode", LAZYLAB_OPTION_ENUM, "fast", "a mode", "fast|exact", 0},
      {"trace", LAZYLAB_OPTION_BOOL, "off", "a switch", nullptr, 0},
  };
  lazylab_backend_api api{};
  api.struct_size = sizeof api;
  api.name = "toy";
  api.options = specs;
  api.num_options = 3;
  REQUIRE(check_declared_options(api).ok());
  CHECK(canonical_options(api, "").value() == "size=8,mode=fast,trace=off");
  CHECK(canonical_options(api, "trace=1,size=064").value() == "size=64,mode=fast,trace=on");
  CHECK(canonical_options(api, "mode=exakt").error().message ==
        "backend 'toy': option 'mode' expects one of {fast, exact}, got 'exakt'");
  CHECK(canonical_options(api, "sise=2").error().message ==
        "backend 'toy' has no option 'sise' (did you mean 'size'?) (options: size, mode, trace)");
  CHECK(canonical_options(api, "size=0").error().message == "backend 'toy': option 'size' must be at least 1, got '0'");
  CHECK(describe_options(api) == std::vector<std::string>{"size=8  (integer >= 1) a size",
                                                          "mode=fast  (fast|exact) a mode",
                                                          "trace=off  (on|off) a switch"});
  // A plugin built before 3.11 (a shorter table) declares none: its text
  // goes to create() as written.
  api.struct_size = offsetof(lazylab_backend_api, options);
  CHECK(declared_options(api).empty());
  CHECK(canonical_options(api, "anything=1").value() == "anything=1");
  // Malformed declarations are refused when the plugin is loaded.
  api.struct_size = sizeof api;
  specs[0].default_value = "0";
  CHECK(check_declared_options(api).error().message ==
        "backend toy declares a bad option: the default of option 'size' must be at least 1, got '0'");
  specs[0].default_value = "8";
  specs[1].choices = nullptr;
  CHECK(check_declared_options(api).error().message ==
        "backend toy declares a bad option: option 'mode' is a choice without choices");
  specs[1].choices = "fast|exact";
  specs[2].summary = nullptr;
  CHECK(check_declared_options(api).error().message ==
        "backend toy declares a bad option: option 'trace' has a NULL default or summary");
}
