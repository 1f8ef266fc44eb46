#!/usr/bin/env bash
# The unit, golden and differential tests, the CLI on malformed inputs, 300
# fuzzed graphs and the libFuzzer corpora,
# under AddressSanitizer + UndefinedBehaviorSanitizer: a second build of the
# tree with -fsanitize=address,undefined in its own folder under the main
# build. Any report (leaks included) fails the run.
# usage: run_asan.sh SOURCE_ROOT BUILD_DIR FILECHECK
set -euo pipefail
src=$(realpath "$1") build=$(realpath "$2")/sanitize-address filecheck=$3
# -O1 with line tables only (-g1): the reports keep file and line, and the
# build, most of CI's time, compiles in about half the time of -O2 -g.
if [[ ! -f $build/build.ninja ]]; then
  meson setup "$build" "$src" -Db_sanitize=address,undefined -Doptimization=1 -Ddebug=false -Dcpp_args=-g1 -Db_ndebug=false -Db_lundef=false \
    -Dcuda=disabled >/dev/null
fi
ninja -C "$build" -j2 tests/lazylab-unit-tests experiments/lazylab backends/cpu/lazylab-backend-cpu.so \
  backends/interp/lazylab-backend-interp.so tests/lazylab-backend-failing.so tests/lazylab-backend-counting.so \
  tests/lazylab-backend-olderminor.so tests/lazylab-backend-wrongabi.so tests/lazylab-backend-noentry.so tests/lazylab-backend-nulldevice.so plugins/lazylab-backend-example.so \
  plugins/capped.so tests/lazylab-pass-wrong-api.so tests/lazylab-pass-duplicate.so tests/lazylab-pass-no-name.so \
  tests/lazylab-pass-orders.so \
  tests/libfuzzer/lazylab-libfuzzer-lzir-parser tests/libfuzzer/lazylab-libfuzzer-pipeline-parser \
  tests/libfuzzer/lazylab-libfuzzer-experiment-loader tests/libfuzzer/lazylab-libfuzzer-onnx-import \
  >"$build/ninja.log" 2>&1 || { tail -30 "$build/ninja.log"; exit 1; }
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 abort_on_error=0 exitcode=99"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 exitcode=99"
export LSAN_OPTIONS="suppressions=$src/tests/sanitize/lsan.supp print_suppressions=0"
export LAZYLAB_PLUGIN_PATH=""
cd "$build"
echo "unit tests"
tests/lazylab-unit-tests --no-intro=true
echo "golden tests"
for golden in "$src"/tests/passes/*.lzir; do
  bash "$src/tests/passes/run_golden.sh" "$build/experiments/lazylab" "$filecheck" "$golden" "$build/tests" >/dev/null \
    || { echo "FAIL $golden"; exit 1; }
done
echo "malformed inputs through the CLI"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lazylab="$build/experiments/lazylab"
expect_exit() {  # expect_exit CODE ARGS...: lazylab ARGS exits CODE, with no sanitizer report (exit 99)
  local want=$1 status=0
  shift
  "$lazylab" "$@" >/dev/null 2>"$work/err" || status=$?
  if [[ $status -ne $want ]]; then echo "FAIL lazylab $*: exit $status, expected $want"; cat "$work/err"; exit 1; fi
}
printf 'graph @g {\n  %%0 = parameter {ordinal = 0} : f32[4611686018427387904,4]\n  return %%0\n}\n' > "$work/huge.lzir"
printf 'graph @g {\n  %%0 = parameter {ordinal = 0} : i64[2]\n  %%1 = constant {value = -9223372036854775808} : i64[2]\n  %%2 = constant {value = -1} : i64[2]\n  %%3 = div(%%1, %%2) : i64[2]\n  %%4 = add(%%0, %%3) : i64[2]\n  return %%4\n}\n' > "$work/intmin.lzir"
printf 'graph @g {\n  %%0 = parameter {ordinal = 0} : f32[2\n' > "$work/cut.lzir"
expect_exit 1 show "$work/huge.lzir"
expect_exit 1 show "$work/cut.lzir"
expect_exit 0 show "$work/intmin.lzir" --pipeline canonicalize,cse,dce,lower
printf 'name: t\nworkloads: [{file: intmin.lzir}, {name: softmax, params: {rows: 3, cols: 5}}]\npipelines: {p: "decompose,canonicalize,fuse{strategy=dominator},lower,plan-memory"}\nbackends: [interp, cpu]\nrepeat: {warmup: 1, runs: 2}\nreport: {json: r.json}\n' > "$work/run.yaml"
LAZYLAB_PLUGIN_PATH="$build/backends/cpu:$build/backends/interp" expect_exit 0 run "$work/run.yaml" -q -o "$work/out"
echo "fuzzing"
expect_exit 0 fuzz --graphs 300 --seed 3 -q
echo "ONNX node tests"
LAZYLAB_PLUGIN_PATH="$build/backends/cpu:$build/backends/interp" expect_exit 0 onnx-test -b cpu -p 'decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory'
echo "libFuzzer corpora replayed"
for target in lzir-parser pipeline-parser experiment-loader onnx-import; do
  "$build/tests/libfuzzer/lazylab-libfuzzer-$target" "$src/tests/libfuzzer/corpus/$target" >/dev/null
done
echo "asan+ubsan: clean"
