#!/usr/bin/env bash
# The cpu backend's threaded tests under ThreadSanitizer, each repeated: a
# second build of the tests and plugins with -fsanitize=thread, in its own
# folder under the main build. Any report fails the run.
# usage: run_tsan.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
src=$1 build=$2/sanitize-thread
# -O1 with line tables only (-g1): the reports keep file and line, and the
# build, most of CI's time, compiles in about half the time of -O2 -g.
if [[ ! -f $build/build.ninja ]]; then
  meson setup "$build" "$src" -Db_sanitize=thread -Doptimization=1 -Ddebug=false -Dcpp_args=-g1 -Db_ndebug=false -Db_lundef=false -Dcuda=disabled >/dev/null
fi
ninja -C "$build" -j2 tests/lazylab-unit-tests backends/cpu/lazylab-backend-cpu.so backends/interp/lazylab-backend-interp.so \
  >"$build/ninja.log" 2>&1 || { tail -30 "$build/ninja.log"; exit 1; }
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
export LAZYLAB_PLUGIN_PATH=""
cd "$build"
for round in 1 2 3; do
  echo "round $round"
  tests/lazylab-unit-tests --source-file='*cpu_backend_test*' --no-intro=true
  tests/lazylab-unit-tests --source-file='*differential_test*' --no-intro=true
  tests/lazylab-unit-tests --source-file='*network_ops_test*' --no-intro=true  # the parallel convolution loops
done
