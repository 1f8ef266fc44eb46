#!/usr/bin/env bash
# Runs one libFuzzer target for a number of executions.
#   usage: run_libfuzzer.sh TARGET RUNS [--merge]
#   TARGET: lzir-parser | pipeline-parser | experiment-loader
# Builds the tree with clang, libFuzzer and ASan+UBSan in build-libfuzzer/
# (once), fuzzes from the committed seed corpus plus a working corpus kept in
# that build folder, with a dictionary of the committed syntax tokens and the
# names the op table, the pass registry and the experiment loader define.
# --merge folds inputs that add coverage back into the committed corpus, so
# the fuzz suite's replay (every build) covers them. A crash leaves its input
# as build-libfuzzer/crash-* and exits non-zero.
set -euo pipefail
target=$1 runs=$2 merge=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-libfuzzer
here=$src/tests/libfuzzer
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup "$build" "$src" -Dlibfuzzer=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debugoptimized -Dcuda=disabled >/dev/null
fi
ninja -C "$build" -j"$(nproc)" "tests/libfuzzer/lazylab-libfuzzer-$target" experiments/lazylab >/dev/null

dict=$build/$target.dict
case $target in
  lzir-parser)
    cp "$here/lzir.dict" "$dict"
    sed -n 's/^LAZYLAB_OP([A-Za-z]*, "\([a-z_]*\)".*"\(.*\)")$/\1 \2/p' "$src/plugins/include/lazylab/ops.def" |
      tr ' ,' '\n\n' | sed 's/:.*//' | grep -v '^$' | sort -u | sed 's/.*/"&"/' >>"$dict" ;;
  pipeline-parser)
    cp "$here/pipeline.dict" "$dict"
    "$build/experiments/lazylab" passes | grep -oE '^[a-z-]+|[a-z-]+=|[{|][a-z-]+' | tr -d '{|=' | sort -u |
      sed 's/.*/"&"/' >>"$dict" ;;
  experiment-loader)
    cp "$here/experiment.dict" "$dict"
    grep -o 'expect_keys([^;]*' "$src/experiments/runner/experiment.cpp" | grep -oE '"[a-z-]+"' | sort -u |
      sed 's/"\(.*\)"/"\1: "/' >>"$dict" ;;
  *) echo "unknown target '$target'" >&2; exit 2 ;;
esac

work=$build/corpus/$target
mkdir -p "$work"
export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$src/tests/sanitize/lsan.supp print_suppressions=0"
cd "$build"
"$build/tests/libfuzzer/lazylab-libfuzzer-$target" -runs="$runs" -dict="$dict" -max_len=4096 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 "$work" "$here/corpus/$target"
if [[ $merge == --merge ]]; then
  "$build/tests/libfuzzer/lazylab-libfuzzer-$target" -merge=1 -dict="$dict" "$here/corpus/$target" "$work"
fi
