#!/usr/bin/env bash
# The four reference networks (experiments/models-small.yaml: ResNet-18,
# MobileNetV2, BERT and GPT-2 at CI size), exported from PyTorch by the
# experiment's prepare step: every cell correct against the interpreter,
# PyTorch eager timed as a peer on every model, and each model's output
# against PyTorch's own on interp and on cpu through every fusion strategy;
# and the four as training steps (experiments/training-models.yaml).
# usage: run_models.sh LAZYLAB SOURCE_ROOT
set -uo pipefail
lazylab=$1 root=$2
if ! /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
  echo "SKIP: needs python3-torch, python3-torchvision and python3-onnx (bash .ci/setup)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; [[ -n ${2:-} ]] && sed 's/^/     /' "$2" | tail -30; failed=$((failed + 1)); }

if "$lazylab" run "$root/experiments/models-small.yaml" --output-dir "$work/report" -q >"$work/run.log" 2>&1 &&
  python3 - "$work/report/models-small.json" >"$work/check.log" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cells = r["cells"]
assert len(cells) == 24, len(cells)
assert r["all_correct"], [(c["workload_shown"], c["pipeline"], c.get("correctness")) for c in cells if not c.get("correct")]
peer = r["peers"][0]
assert not peer.get("error") and len(peer["cells"]) == 4, peer
for c in cells:
    assert c["kernels"] > 0 and c["step_ms"]["median"] > 0, c["workload_shown"]
print("ok")
PY
then
  ok "models-small: 24 cells correct against interp, PyTorch eager timed on all 4 models"
else
  fail "models-small experiment" "$work/run.log"; cat "$work/check.log" 2>/dev/null
fi

# The four as lazylab training steps (loss, reverse mode, optimizer step):
# every cell against the interpreter's step, with rematerialization.
if "$lazylab" run "$root/experiments/training-models.yaml" --output-dir "$work/train" -q --set repeat.runs=1 \
  --set repeat.warmup=0 --filter pipeline=min-cut/gemm-epilogue >"$work/train.log" 2>&1 &&
  python3 - "$work/train/training-models.json" >"$work/train-check.log" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cells = r["cells"]
assert len(cells) == 8, len(cells)
assert r["all_correct"], [(c["workload_shown"], c["pipeline"], c.get("correctness")) for c in cells if not c.get("correct")]
print("ok")
PY
then
  ok "training-models: the 4 networks' training steps correct against interp, with min-cut"
else
  fail "training-models experiment" "$work/train.log"; cat "$work/train-check.log" 2>/dev/null
fi

data=$root/experiments/models/onnx-small
strategies=$("$lazylab" passes | sed -n 's/.*strategy={\([^}]*\)}.*: the fusion strategy$/\1/p' | tr '|' ' ')
check() {  # check BACKEND PIPELINE
  local out
  out=$("$lazylab" onnx-test --data "$data" --filter '*' --atol 1e-4 -b "$1" -p "$2" 2>&1)
  if grep -q ": 4 passed, 0 failed, 0 unsupported, 0 disputed (of 4)" <<<"$out"; then
    ok "against PyTorch's outputs on $1 '$2'"
  else
    echo "$out" >"$work/onnx.log"; fail "against PyTorch's outputs on $1 '$2'" "$work/onnx.log"
  fi
}
check interp 'decompose,lower'
for strategy in $strategies; do check cpu "decompose,canonicalize,cse,dce,fuse{strategy=$strategy},lower,plan-memory"; done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
