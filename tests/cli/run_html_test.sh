#!/usr/bin/env bash
# The HTML report in a real browser: headless Chromium (Debian's chromium)
# loads the page from a file with every host name unresolvable, and the test
# checks that each chart rendered, that no script error or console error
# occurred, and saves a screenshot (BUILD/tests/html-report.png) for a person.
# usage: run_html_test.sh LAZYLAB SOURCE_ROOT TESTS_BUILD_DIR
set -uo pipefail
lazylab=$(realpath "$1") src=$2 test_build=$(realpath "$3")
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "SKIP: no chromium (install Debian's chromium: bash .ci/setup)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

"$lazylab" report "$src/tests/data/report-fixture.json" --format html -o "$work/report.html" >/dev/null || fail "render"
offline=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --virtual-time-budget=10000
         "--host-resolver-rules=MAP * ~NOTFOUND" --enable-logging=stderr --v=0)
timeout 120 "$browser" "${offline[@]}" --dump-dom "file://$work/report.html" > "$work/dom.html" 2> "$work/console.txt"
timeout 120 "$browser" "${offline[@]}" --window-size=1280,2400 --screenshot="$test_build/html-report.png" \
  "file://$work/report.html" > /dev/null 2>&1

charts=$(grep -o '<canvas[^>]*data-chart=' "$work/dom.html" | wc -l)
drawn=$(grep -o '<canvas[^>]*data-drawn="true"' "$work/dom.html" | wc -l)
if [[ $charts -eq 6 && $drawn -eq 6 ]]; then ok "all 6 charts rendered"; else fail "charts rendered: $drawn of $charts (want 6)"; fi
rooflines=$(grep -o '<canvas[^>]*data-chart="roofline"[^>]*data-drawn="true"' "$work/dom.html" | wc -l)
if [[ $rooflines -eq 2 ]]; then ok "a roofline per backend"; else fail "rooflines drawn: $rooflines (want 2)"; fi
# the fused softmax on cpu: its 4 kernels, the slowest first, with time and bytes
if grep -q 'data-kernel-table><summary>soft|max &quot;small&quot; / fused / cpu: 4 kernels' "$work/report.html" &&
   grep -q '<td>k1</td><td>broadcast, sub, exp (3 ops)</td><td class="num">2.0198</td>' "$work/report.html"; then
  ok "each cell's kernels in a table, with their times"
else fail "kernel tables"; fi
if grep -q '<pre id="errors" hidden=""></pre>' "$work/dom.html"; then ok "no script errors on the page"
else fail "script errors: $(grep -o '<pre id="errors".*</pre>' "$work/dom.html")"; fi
if grep -E 'CONSOLE.*(Uncaught|Error)' "$work/console.txt"; then fail "console errors"; else ok "no console errors"; fi
if grep -Eq '(src|href)="(https?:)?//' "$work/report.html"; then fail "the page fetches from the network"; else ok "nothing fetched"; fi
tables=$(grep -c '<table>' "$work/dom.html")
if [[ $tables -ge 5 ]]; then ok "$tables tables (cells, traffic, peers, refusals or passes)"; else fail "only $tables tables"; fi
if grep -q 'FAILED: step 1: execute: cpu' "$work/dom.html" && grep -q '<strong>not run</strong>: exited' "$work/dom.html"; then
  ok "the failed cell and the peer that did not run are shown"
else fail "failed cell or peer missing"; fi
graphs=$(grep -c '<details data-kernel-graph' "$work/dom.html")
drawn_graphs=$(grep -c '<svg width=' "$work/report.html")
if command -v dot >/dev/null; then
  if [[ $graphs -eq 7 && $drawn_graphs -eq 7 ]]; then ok "7 kernel graphs drawn by Graphviz"
  else fail "kernel graphs: $graphs, drawn $drawn_graphs (want 7 of each)"; fi
else
  if [[ $graphs -eq 7 ]] && grep -q 'could not draw it' "$work/report.html"; then ok "without Graphviz, 7 kernel graphs as DOT"
  else fail "kernel graphs without Graphviz: $graphs"; fi
fi
if grep -q 'kernel 0: reduce_mean; reads and writes 25.199 MB' "$work/dom.html"; then ok "a kernel's ops and bytes on hover"; else fail "kernel tooltips"; fi
if [[ -s $test_build/html-report.png ]]; then ok "screenshot at $test_build/html-report.png"; else fail "no screenshot"; fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
