#!/usr/bin/env bash
# The layers, checked on what the compiler actually read (ninja's header
# dependencies): core/, passes/, python/ and experiments/ reach the backends
# only through the plugin ABI, never by including a file under backends/.
# The runner's host ceilings still use the cpu backend's OpenBLAS loader and
# non-temporal copy (issue 35's point 4: the cpu backend is to measure them
# through the ABI): those edges, and no other, are allowed, and each must
# still exist, so that removing one removes it here too.
# usage: layering_check.sh BUILD_ROOT
set -euo pipefail
build=$1
allowed=(
  "experiments/runner/ceilings.cpp backends/openblas/openblas_runtime.h"
  "experiments/runner/runner.cpp backends/openblas/openblas_runtime.h"
  "experiments/runner/stream_copy.cpp backends/cpu/stream_store.h"
  "experiments/runner/stream_copy.cpp backends/cpu/float_math.h"
)
edges=$(ninja -C "$build" -t deps | awk '
  /^[^ ].*: #deps/ { source = "" }
  /^    / {
    path = $1; sub(/^(\.\.\/)+/, "", path)
    if (source == "" && path ~ /\.(cpp|c)$/) { source = path; next }
    if (source ~ /^(core|passes|python|experiments)\// && path ~ /^backends\//) print source " " path
  }' | sort -u)
status=0
while IFS= read -r edge; do
  [[ -z $edge ]] && continue
  found=0
  for ok in "${allowed[@]}"; do [[ $edge == "$ok" ]] && found=1; done
  ((found)) || { echo "FAIL: ${edge% *} includes ${edge#* } (a backend's file; use the plugin ABI)"; status=1; }
done <<<"$edges"
for ok in "${allowed[@]}"; do
  grep -qxF "$ok" <<<"$edges" || { echo "FAIL: allowed edge '$ok' is gone: take it off the list"; status=1; }
done
((status == 0)) && echo "layering: no file of core/, passes/, python/ or experiments/ includes a backend's, but the ${#allowed[@]} listed"
exit $status
