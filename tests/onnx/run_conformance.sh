#!/usr/bin/env bash
# ONNX's backend tests (Debian's libonnx-testdata) on interp, and on cpu
# through every registered fusion strategy: none may fail, and the number
# that pass is pinned per test set (a test that turns unsupported shows).
# usage: run_conformance.sh LAZYLAB SET=EXPECTED_PASSES...
#   SET: a folder of /usr/share/libonnx-testdata/data (node, pytorch-converted, ...)
set -uo pipefail
lazylab=$1
shift
data=/usr/share/libonnx-testdata/data
if [[ ! -d $data/node ]]; then
  echo "SKIP: no ONNX test data (install libonnx-testdata: bash .ci/setup)"; exit 77
fi
strategies=$("$lazylab" passes | sed -n 's/.*strategy={\([^}]*\)}.*: the fusion strategy$/\1/p' | tr '|' ' ')
[[ -n $strategies ]] || { echo "FAIL: no fusion strategies listed by lazylab passes"; exit 1; }
passed=0 failed=0
check() {  # check SET EXPECTED BACKEND PIPELINE
  local out summary
  out=$("$lazylab" onnx-test --data "$data/$1" -b "$3" -p "$4" 2>&1)
  summary=$(grep '^onnx node tests' <<<"$out")
  if [[ $summary == *": $2 passed, 0 failed,"* ]]; then
    echo "ok   $1: $summary"; passed=$((passed + 1))
  else
    echo "FAIL $1 on $3 '$4': want $2 passed, 0 failed"; grep -E '^failed|^onnx node tests' <<<"$out" | head -20
    failed=$((failed + 1))
  fi
}
for set_and_count in "$@"; do
  set_name=${set_and_count%=*} expected=${set_and_count#*=}
  check "$set_name" "$expected" interp 'decompose,lower'
  for strategy in $strategies; do
    check "$set_name" "$expected" cpu "decompose,canonicalize,cse,dce,fuse{strategy=$strategy},lower,plan-memory"
  done
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
