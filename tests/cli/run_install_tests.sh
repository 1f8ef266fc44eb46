#!/usr/bin/env bash
# The SDK as a researcher meets it: `meson install` into a staging folder,
# then the installed CLI, the installed headers (each on its own), the
# Tensor API example built out of tree with pkg-config and with CMake, and
# the example strategy and backend plugins built out of tree, all from
# outside the source and build trees.
# usage: run_install_tests.sh BUILD_ROOT SOURCE_ROOT
set -uo pipefail
build=$(realpath "$1") src=$(realpath "$2")
# An installed program finds liblazylab by its own run path, as on a user's
# machine; meson test points LD_LIBRARY_PATH at the build tree.
unset LD_LIBRARY_PATH LAZYLAB_PLUGIN_PATH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; [[ -n ${2:-} ]] && head -20 "$2"; failed=$((failed + 1)); }

# meson test has built everything install needs (the test's depends), so
# install must not rebuild: that would race the other tests' builds.
stage=$work/stage
if meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >"$work/install.log" 2>&1; then
  ok "meson install --destdir"
else
  fail "meson install --destdir" "$work/install.log"
  echo "$passed passed, $failed failed"; exit 1
fi
prefix=$stage$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
libdir=$(dirname "$(find "$prefix" -name 'liblazylab.so' | head -1)")
lazylab=$prefix/bin/lazylab
cd "$work"  # nothing below may reach into the source or build tree by accident

for file in "$lazylab" "$libdir/liblazylab.so" "$libdir/lazylab/lazylab-backend-interp.so" \
  "$libdir/lazylab/lazylab-backend-cpu.so" "$libdir/pkgconfig/lazylab.pc" "$libdir/pkgconfig/lazylab-plugin.pc" \
  "$libdir/cmake/lazylab/lazylabConfig.cmake" "$libdir/cmake/lazylab/lazylabConfigVersion.cmake" \
  "$prefix/include/lazylab/lazylab.h" "$prefix/include/lazylab/core/tensor.h" "$prefix/include/lazylab/backend_abi.h" \
  "$prefix/include/lazylab/row_space.hpp" "$prefix/include/lazylab/window_shape.hpp" \
  "$prefix/include/lazylab/reference/kernels.h" \
  "$libdir/liblazylab-reference.a" "$libdir/pkgconfig/lazylab-reference.pc" \
  "$prefix/share/lazylab/experiments/quickstart.yaml" "$prefix/share/lazylab/experiments/workloads/axpy.lzir"; do
  [[ -e $file ]] || { fail "installed: ${file#"$stage"}"; missing=1; }
done
if [[ -n ${missing:-} ]]; then
  :
elif find "$prefix" -name 'lazylab-unit-tests' -o -name 'lazylab-libfuzzer-*' -o -name 'lazylab-bench' \
  -o -name 'lazylab-backend-failing.so' -o -name 'lazylab-example-mlp' | grep -q .; then
  fail "install holds no tests or benchmarks"
else
  ok "install holds the SDK files and no tests or benchmarks"
fi

# The installed CLI: its own plugins only, never the build tree's.
"$lazylab" --version >"$work/version" 2>&1
if grep -q "^lazylab [0-9]" "$work/version" && grep -q "backend ABI: 3\." "$work/version" &&
  grep -q "plugin path: $libdir/lazylab\$" "$work/version" && ! grep -q "$build" "$work/version"; then
  ok "installed lazylab --version: version, ABI, its own plugin folder only"
else
  fail "installed lazylab --version" "$work/version"
fi
"$lazylab" backends >"$work/backends" 2>&1
if [[ $(grep -c "^interp " "$work/backends") == 1 && $(grep -c "^cpu " "$work/backends") == 1 ]] &&
  grep -q "file: $libdir/lazylab/lazylab-backend-cpu.so" "$work/backends" && ! grep -q "$build" "$work/backends"; then
  ok "installed lazylab backends: each once, from the install"
else
  fail "installed lazylab backends" "$work/backends"
fi
cp -r "$prefix/share/lazylab/experiments" "$work/experiments"
if "$lazylab" run "$work/experiments/quickstart.yaml" --filter 'workload=*axpy*' \
  -o "$work/quickstart" >"$work/run" 2>&1 && [[ -s $work/quickstart/quickstart.json ]]; then
  ok "installed lazylab runs the installed quickstart experiment"
else
  fail "installed lazylab runs the installed quickstart experiment" "$work/run"
fi

# The installed Python package, from outside both trees: it finds the
# installed liblazylab by its own run path, and that library its plugins.
core=$(find "$prefix" -name '_core*.so' -path '*/lazylab/*' | head -1)
if [[ -z $core ]]; then
  echo "skip the installed Python package: not built here"
elif PYTHONPATH=$(dirname "$(dirname "$core")") /usr/bin/python3 -c "
import lazylab, numpy as np
x = lazylab.context(backend='cpu').tensor(np.arange(4, dtype=np.float32))
assert (x * 2.0).tolist() == [0, 2, 4, 6]
assert lazylab.Backend('interp').path.startswith('$libdir/lazylab/'), lazylab.Backend('interp').path
assert '$build' not in lazylab._core.__file__
" >"$work/python.log" 2>&1; then
  ok "the installed Python package runs on the installed library and plugins"
else
  fail "the installed Python package" "$work/python.log"
fi

# pkg-config with nothing else: the staged prefix stands in for /usr/local.
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
flags=$(pkg-config --cflags --libs lazylab)
header_failures=0
for header in "$prefix"/include/lazylab/core/*.h "$prefix/include/lazylab/lazylab.h"; do
  name=${header#"$prefix/include/"}
  echo "#include <$name>" >"$work/one.cpp"
  g++ -std=c++20 -fsyntax-only $(pkg-config --cflags lazylab) "$work/one.cpp" 2>"$work/header.log" ||
    { fail "<$name> compiles on its own" "$work/header.log"; header_failures=$((header_failures + 1)); }
done
for header in "$prefix"/include/lazylab/*.hpp "$prefix"/include/lazylab/reference/*.h; do
  name=${header#"$prefix/include/"}
  echo "#include <$name>" >"$work/one.cpp"
  g++ -std=c++20 -fsyntax-only $(pkg-config --cflags lazylab-reference) "$work/one.cpp" 2>"$work/header.log" ||
    { fail "<$name> compiles on its own" "$work/header.log"; header_failures=$((header_failures + 1)); }
done
((header_failures == 0)) && ok "each installed header compiles on its own"

# An out-of-tree host backend falls back on the installed reference kernels:
# a product they compute, linked with pkg-config's lazylab-reference alone.
cat >"$work/reference.cpp" <<'CPP'
#include <lazylab/reference/kernels.h>
#include <cstdio>
int main() {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {};
  lazylab::reference::Array x{LAZYLAB_F32, {2, 2}, a}, y{LAZYLAB_F32, {2, 2}, b}, z{LAZYLAB_F32, {2, 2}, c};
  lazylab::reference::evaluate(LAZYLAB_OP_Matmul, {&x, &y}, {}, z);
  std::printf("%g %g %g %g\n", c[0], c[1], c[2], c[3]);
}
CPP
if g++ -std=c++20 "$work/reference.cpp" $(pkg-config --cflags --libs lazylab-reference) -o "$work/reference" \
  2>"$work/reference.log" && [[ $("$work/reference" 2>>"$work/reference.log") == "19 22 43 50" ]]; then
  ok "the reference kernels link out of tree (pkg-config lazylab-reference) and compute a product"
else
  fail "the reference kernels link out of tree (pkg-config lazylab-reference) and compute a product" "$work/reference.log"
fi

example=$src/plugins/examples/tensor-api
if g++ -std=c++20 -O1 "$example/mlp.cpp" $flags -o "$work/mlp-pkgconfig" 2>"$work/build.log"; then
  ok "example built with pkg-config --cflags --libs lazylab"
  if LD_LIBRARY_PATH=$libdir "$work/mlp-pkgconfig" >"$work/mlp.out" 2>&1 &&
    grep -q "eager vs fused: largest difference" "$work/mlp.out"; then
    ok "example (pkg-config) runs two pipelines and they agree"
  else
    fail "example (pkg-config) runs two pipelines and they agree" "$work/mlp.out"
  fi
else
  fail "example built with pkg-config --cflags --libs lazylab" "$work/build.log"
fi

if cmake -S "$example" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1; then
  ok "example built with CMake find_package(lazylab)"
  if "$work/cmake/mlp" >"$work/mlp-cmake.out" 2>&1; then
    ok "example (CMake) runs"
  else
    fail "example (CMake) runs" "$work/mlp-cmake.out"
  fi
else
  fail "example built with CMake find_package(lazylab)" "$work/cmake.log"
fi

# The example backend built out of tree with meson against the installed
# plugin SDK (lazylab-plugin.pc), found by the installed lazylab through
# LAZYLAB_PLUGIN_PATH and run in an experiment, every step checked.
backend_build=$work/example-backend
if meson setup "$backend_build" "$src/plugins/examples/elementwise-backend" >"$work/backend-build.log" 2>&1 &&
  ninja -C "$backend_build" >>"$work/backend-build.log" 2>&1; then
  ok "example backend built out of tree with meson and lazylab-plugin.pc"
else
  fail "example backend built out of tree with meson and lazylab-plugin.pc" "$work/backend-build.log"
fi
LAZYLAB_PLUGIN_PATH=$backend_build "$lazylab" backends >"$work/backends-example" 2>&1
if grep -q "^example " "$work/backends-example" &&
  grep -q "file: $backend_build/lazylab-backend-example.so" "$work/backends-example"; then
  ok "installed lazylab lists the out-of-tree backend from LAZYLAB_PLUGIN_PATH"
else
  fail "installed lazylab lists the out-of-tree backend" "$work/backends-example"
fi
cat >"$work/example-backend.yaml" <<YAML
name: out-of-tree-backend
workloads: [{name: chain-small, params: {iters: 10}}]
pipelines: {eager: "decompose,fuse{strategy=none},lower", fused: "decompose,fuse{strategy=greedy-elementwise},lower"}
backends: [example]
repeat: {warmup: 1, runs: 3}
report: {json: example.json}
YAML
if LAZYLAB_PLUGIN_PATH=$backend_build "$lazylab" run "$work/example-backend.yaml" -o "$work/example-run" \
  >"$work/example-run.log" 2>&1 &&
  python3 - "$work/example-run/example.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert len(cells) == 2, cells
assert all(c["backend"] == "example" and c["status"] == "ok" and c["correctness"]["pass"] for c in cells), cells
PY
then
  ok "an experiment runs on the out-of-tree backend, every step checked against interp"
else
  fail "an experiment runs on the out-of-tree backend" "$work/example-run.log"
fi

# A strategy plugin built out of tree with pkg-config, compared with the
# built-ins in one report.
plugin=$work/capped.so
if g++ -std=c++20 -shared -fPIC "$src/plugins/examples/capped-strategy/capped.cpp" $flags -o "$plugin" \
  2>"$work/plugin.log"; then
  ok "strategy plugin built with pkg-config"
else
  fail "strategy plugin built with pkg-config" "$work/plugin.log"
fi
"$lazylab" passes --load-plugin "$plugin" >"$work/passes" 2>&1
if grep -q "strategy capped: .*\[plugin capped-strategy 1.0\]" "$work/passes" &&
  grep -q "option max-ops=int (default 8)" "$work/passes"; then
  ok "lazylab passes --load-plugin lists the plugin's strategy with its option and origin"
else
  fail "lazylab passes --load-plugin lists the plugin's strategy" "$work/passes"
fi
cat >"$work/compare.yaml" <<YAML
name: capped-vs-built-ins
workloads: [{name: chain-small, params: {iters: 40}}, {name: softmax, params: {rows: 64, cols: 256}}]
plugins: [capped.so]
pipelines:
  none: "decompose,fuse{strategy=none},lower"
  greedy: "decompose,fuse{strategy=greedy-elementwise},lower"
  capped-4: "decompose,fuse{strategy=capped,max-ops=4},lower"
  capped-16: "decompose,fuse{strategy=capped,max-ops=16},lower"
backends: [cpu]
repeat: {warmup: 1, runs: 5}
report: {json: compare.json}
YAML
if "$lazylab" run "$work/compare.yaml" -o "$work/compare" >"$work/compare.log" 2>&1 &&
  python3 - "$work/compare/compare.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["plugins"] and report["plugins"][0].startswith("capped-strategy 1.0 ("), report["plugins"]
cells = report["cells"]
pipelines = {c["pipeline"] for c in cells}
assert pipelines == {"none", "greedy", "capped-4", "capped-16"}, pipelines
assert all(c["status"] == "ok" for c in cells), [c["status"] for c in cells]
kernels = {(c["workload"], c["pipeline"]): c["kernels"] for c in cells}
chain = "chain-small"
assert kernels[(chain, "none")] > kernels[(chain, "capped-4")] > kernels[(chain, "capped-16")] >= kernels[(chain, "greedy")], kernels
PY
then
  ok "a report compares the plugin strategy (two option values) with built-ins, every cell checked"
else
  fail "a report compares the plugin strategy with built-ins" "$work/compare.log"
fi
"$lazylab" passes --load-plugin "$work/missing.so" >"$work/refused" 2>&1
if [[ $? == 1 ]] && grep -q "pass plugin $work/missing.so: no such file" "$work/refused"; then
  ok "a missing plugin is refused, naming the file"
else
  fail "a missing plugin is refused, naming the file" "$work/refused"
fi

echo "$passed passed, $failed failed"
((failed == 0))
