#!/usr/bin/env bash
# The layers, checked on what the compiler actually read (ninja's header
# dependencies): core/, passes/, python/ and experiments/ reach the backends
# only through the plugin ABI, never by including a file under backends/
# (the host's ceilings too: the cpu backend measures them, ABI 3.12). An
# edge that must be allowed goes in `allowed`, and must then still exist, so
# that removing one removes it here too.
# usage: layering_check.sh BUILD_ROOT
set -euo pipefail
build=$1
allowed=()
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
((status == 0)) && echo "layering: no file of core/, passes/, python/ or experiments/ includes a backend's (${#allowed[@]} allowed)"
exit $status
