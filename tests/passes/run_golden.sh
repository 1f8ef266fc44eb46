#!/usr/bin/env bash
# Runs the `// RUN:` line of a golden IR test, MLIR style:
#   // RUN: lazylab show %s --split-input-file --pipeline 'cse' | FileCheck %s
# usage: run_golden.sh LAZYLAB FILECHECK TEST.lzir
set -euo pipefail
lazylab=$1 filecheck=$2 file=$3
run=$(grep -m1 '^// RUN:' "$file" | sed 's|^// RUN: *||')
[[ -n "$run" ]] || { echo "$file: no // RUN: line"; exit 1; }
run=${run//%s/$file}
run=${run/lazylab /$lazylab }
run=${run//FileCheck/$filecheck}
exec bash -o pipefail -c "$run"
