#!/usr/bin/env bash
# Runs each `// RUN:` line of a golden IR test, MLIR style:
#   // RUN: lazylab show %s --split-input-file --pipeline 'cse' | FileCheck %s
# %plugins names the folder of the test plugins (for capability limits).
# usage: run_golden.sh LAZYLAB FILECHECK TEST.lzir PLUGIN_DIR
set -euo pipefail
lazylab=$1 filecheck=$2 file=$3 plugins=$4
mapfile -t runs < <(grep '^// RUN:' "$file" | sed 's|^// RUN: *||')
((${#runs[@]} > 0)) || { echo "$file: no // RUN: line"; exit 1; }
for run in "${runs[@]}"; do
  run=${run//%plugins/$plugins}
  run=${run//%s/$file}
  run=${run/lazylab /$lazylab }
  run=${run//FileCheck/$filecheck}
  bash -o pipefail -c "$run"
done
