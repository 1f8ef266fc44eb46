#!/usr/bin/env bash
# The notebooks under notebooks/, executed headless (Debian's
# jupyter-nbconvert, pandas, matplotlib) against reports the quickstart and
# a small sweep just wrote, so they never rot. Each must run to the end and
# draw its figure. Skips where jupyter-nbconvert is not installed.
# usage: run_notebook_tests.sh LAZYLAB SOURCE_ROOT
set -uo pipefail
lazylab=$(realpath "$1") src=$(realpath "$2")
if ! command -v jupyter-nbconvert >/dev/null; then
  echo "SKIP: no jupyter-nbconvert (bash .ci/setup installs it)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
cd "$src"
for run in a b; do
  "$lazylab" run experiments/quickstart.yaml -q -o "$work/$run" --set repeat.runs=3 > /dev/null 2>&1 \
    || { echo "FAIL quickstart run $run"; exit 1; }
done
cat > "$work/sweep.yaml" <<'YAML'
name: sweep
workloads: [{name: softmax, params: {rows: [64, 256, 1024], cols: 256}}]
pipelines:
  eager: "decompose,fuse{strategy=none},lower"
  fused: "decompose,fuse{strategy=greedy-elementwise},lower"
backends: [cpu]
repeat: {warmup: 1, runs: 5}
YAML
"$lazylab" run "$work/sweep.yaml" -q -o "$work/sweep" > /dev/null 2>&1 || { echo "FAIL sweep run"; exit 1; }

export LAZYLAB_REPORTS="$work/a/quickstart.json:$work/sweep/sweep.json"
export LAZYLAB_OLD="$work/a/quickstart.json" LAZYLAB_NEW="$work/b/quickstart.json"
for notebook in notebooks/*.ipynb; do
  name=$(basename "$notebook" .ipynb)
  report="$work/a/quickstart.json"
  [[ $name == sweep ]] && report="$work/sweep/sweep.json"
  if ! LAZYLAB_REPORT=$report timeout 300 jupyter-nbconvert --to notebook --execute \
      --ExecutePreprocessor.timeout=180 --output-dir "$work/out" "$notebook" > "$work/$name.log" 2>&1; then
    echo "FAIL $name: it did not run to the end"; tail -20 "$work/$name.log"; failed=$((failed + 1)); continue
  fi
  figures=$(grep -c '"image/png"' "$work/out/$name.ipynb")
  if [[ $figures -ge 1 ]]; then echo "ok   $name ($figures figure)"; passed=$((passed + 1))
  else echo "FAIL $name: no figure"; failed=$((failed + 1)); fi
done
grep -q 'sweep over softmax' "$work/out/sweep.ipynb" \
  && { echo "ok   sweep plots the swept workload"; passed=$((passed + 1)); } \
  || { echo "FAIL sweep did not find the sweep"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
