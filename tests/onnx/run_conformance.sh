#!/usr/bin/env bash
# ONNX's backend node tests (Debian's libonnx-testdata) on interp, and on cpu
# through every registered fusion strategy: none may fail, and the number
# that pass is pinned (a test that turns unsupported or skipped shows here).
# usage: run_conformance.sh LAZYLAB EXPECTED_PASSES
set -uo pipefail
lazylab=$1 expected=$2
if [[ ! -d /usr/share/libonnx-testdata/data/node ]]; then
  echo "SKIP: no ONNX node tests (install libonnx-testdata: bash .ci/setup)"; exit 77
fi
strategies=$("$lazylab" passes | sed -n 's/.*strategy={\([^}]*\)}.*/\1/p' | tr '|' ' ')
[[ -n $strategies ]] || { echo "FAIL: no fusion strategies listed by lazylab passes"; exit 1; }
passed=0 failed=0
check() {  # check BACKEND PIPELINE
  local out summary
  out=$("$lazylab" onnx-test -b "$1" -p "$2" 2>&1)
  summary=$(grep '^onnx node tests' <<<"$out")
  if [[ $summary == *": $expected passed, 0 failed,"* ]]; then
    echo "ok   $summary"; passed=$((passed + 1))
  else
    echo "FAIL $1 '$2': want $expected passed, 0 failed"; grep -E '^failed|^onnx node tests' <<<"$out" | head -20
    failed=$((failed + 1))
  fi
}
check interp 'decompose,lower'
for strategy in $strategies; do
  check cpu "decompose,canonicalize,cse,dce,fuse{strategy=$strategy},lower,plan-memory"
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
