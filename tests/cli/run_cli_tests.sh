#!/usr/bin/env bash
# The CLI tested the way a user runs it.
# usage: run_cli_tests.sh LAZYLAB SOURCE_ROOT TESTS_BUILD_DIR
set -uo pipefail
lazylab=$(realpath "$1") src=$2 test_build=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src"
passed=0 failed=0

# check NAME EXPECTED_EXIT PATTERN -- COMMAND...: runs COMMAND, checks its exit
# code and that stdout+stderr match the extended regex PATTERN.
check() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]]; then
    echo "FAIL $name: exit $status, expected $want"; echo "$out" | head -20; failed=$((failed + 1)); return
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/"; echo "$out" | head -20; failed=$((failed + 1)); return
  fi
  echo "ok   $name"; passed=$((passed + 1))
}

experiment() {  # experiment FILE LINES...: writes a small experiment
  local file=$1; shift
  printf '%s\n' "$@" > "$file"
}

check "help lists commands" 0 "run +run an experiment" -- "$lazylab" --help
check "no command is a usage error" 2 "usage: lazylab COMMAND" -- "$lazylab"
check "unknown command" 2 "unknown command 'rn'" -- "$lazylab" rn
for command in run show passes backends workloads compare merge fuzz report; do
  check "$command --help" 0 "usage: lazylab $command" -- "$lazylab" "$command" --help
done
check "run needs an experiment" 2 "required" -- "$lazylab" run
check "unknown option" 2 "unrecognised option|unrecognized option" -- "$lazylab" passes --colour

# The quickstart, as the README runs it (reports into a scratch folder).
check "quickstart runs" 0 "wrote .*quickstart.json" -- "$lazylab" run experiments/quickstart.yaml -o "$work/qs" -q
check "quickstart JSON is complete" 0 "ok" -- python3 -c "
import json, sys
r = json.load(open('$work/qs/quickstart.json'))
assert r['schema_version'] == 3, r['schema_version']
assert r['all_correct'] is True
assert len(r['cells']) == 32, len(r['cells'])
assert len(r['experiment']['hash']) == 16
assert r['ceilings']['copy_gb_s'] > 0 and r['ceilings']['sgemm_gflop_s'] > 0, r['ceilings']
assert r['ceilings']['elementwise_gop_s'] > 0 and 'OpenBLAS' in r['ceilings']['blas'], r['ceilings']
chain = [c for c in r['cells'] if c['workload'] == 'chain-small']
assert all(c['elementwise_ops'] == 3 * 100 * 4096 for c in chain), [c['elementwise_ops'] for c in chain]
for c in r['cells']:
    assert c['bytes_moved'] == sum(c['kernel_bytes']) and c['minimum_bytes'] > 0, c
    assert 0 < c['floor_fraction'] and c['arena_bytes'] <= c['naive_arena_bytes'], c
    assert c['rounds_copy_gb_s'] == 0 and c['rounds_floor_fraction'] == 0, c  # no flush: no probe in the rounds
mlp = [c for c in r['cells'] if c['workload'] == 'mlp'][0]
assert mlp['flops'] == 2 * 8 * 64 * 128 * 2, mlp['flops']
for c in r['cells']:
    assert c['correctness']['pass'] and c['step_ms']['median'] > 0 and c['kernels'] > 0, c
    assert c['metrics']['cache_misses'] == 1, c['metrics']
    assert c['passes'], c
    # each kernel timed over the profiled steps, which are not among the timed ones
    assert len(c['kernel_ms']) == len(c['kernel_labels']) == len(c['kernel_operations']) == c['kernels'], c
    assert all(ms >= 0 for ms in c['kernel_ms']) and sum(c['kernel_ms']) > 0, c['kernel_ms']
    assert sum(c['kernel_operations']) == c['flops'] + c['elementwise_ops'], c
    assert sum(c['kernel_flops']) == c['flops'], c
    assert len(c['samples']['step_ms']) == r['experiment']['runs'], c['samples']
assert r['experiment']['profile_steps'] == 3, r['experiment']
codes = {'cycle', 'capability', 'size-limit', 'op-kind', 'iteration-space', 'several-consumers', 'cost'}
assert all(set(c['fusion_refusals']) <= codes for c in r['cells'])
# interp fuses nothing: every pair producer-consumer considers is refused for capability
assert all(c['fusion_refusals'].get('capability', 0) > 0 for c in r['cells'] if c['pipeline'] == 'fused' and c['backend'] == 'interp')
tiny = [c for c in r['cells'] if c['workload'] == 'chain-tiny']
assert all('step_us_per_op' in c for c in tiny)
base = [c for c in r['cells'] if c['pipeline'] == 'eager']
assert all(c['speedup_vs_baseline']['value'] == 1.0 for c in base)
print('ok')"
check "no floor in rounds where the steps run without a flush: its columns are left out" 0 "ok" -- python3 -c "
md = open('$work/qs/quickstart.md').read()
assert 'of floor in rounds' not in md and 'floor ms in rounds' not in md, md
assert 'rounds_floor_fraction' in open('$work/qs/quickstart.csv').readline()
print('ok')"
check "quickstart Markdown" 0 "\| chain-tiny \| eager \| interp \|" -- cat "$work/qs/quickstart.md"

# Cell identity: a size sweep and one backend with two option sets give cells
# told apart by their parameters and options, each its own baseline (the
# runner once matched baselines by workload and backend name: 26.99x and
# 38.58x "speedups" here).
experiment "$work/sweep.yaml" "name: sweep" \
  "workloads: [{name: softmax, params: {rows: 8, cols: 64}}, {name: softmax, params: {rows: 512, cols: 64}, label: tall}]" \
  "pipelines: {fused: 'decompose,fuse{strategy=producer-consumer},lower'}" \
  "backends: [{name: cpu, options: threads=1}, {name: cpu, options: threads=2, label: cpu-2}]" \
  "repeat: {warmup: 1, runs: 3}" "report: {json: $work/sweep.json}"
check "sweep cells are shown apart" 0 "softmax\[cols=64,rows=8\] +fused +cpu\[threads=1\]" -- "$lazylab" run "$work/sweep.yaml"
check "sweep speedups compare a cell with itself" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/sweep.json'))
cells = r['cells']
assert len(cells) == 4, len(cells)
assert all(c['speedup_vs_baseline']['value'] == 1.0 for c in cells), [c['speedup_vs_baseline'] for c in cells]
ids = {(c['workload_params']['rows'], c['backend_options']) for c in cells}
assert ids == {(8, 'threads=1'), (8, 'threads=2'), (512, 'threads=1'), (512, 'threads=2')}, ids
assert {c['label'] for c in cells} == {'', 'tall', 'cpu-2', 'tall / cpu-2'}, [c['label'] for c in cells]
assert all(c['pipeline_text'] == 'decompose,fuse{strategy=producer-consumer},lower' for c in cells)
print('ok')"
experiment "$work/twice.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp, interp]"
check "the same backend twice is an error" 1 "twice.yaml:4: backends\[1\]: the same backend and options as the entry on line 4" -- \
  "$lazylab" run "$work/twice.yaml"

# Sweeps: a parameter list is a grid, a brace list in a pipeline option one
# pipeline per value; --set overrides keys, --filter picks cells (and their
# baselines).
experiment "$work/grid.yaml" "name: grid" "workloads: [{name: softmax, params: {rows: [4, 8], cols: [16, 32]}}]" \
  "pipelines: {base: lower, planned: 'decompose,lower,plan-memory{algo={naive,linear-scan}}'}" "backends: [interp]" \
  "repeat: {warmup: 0, runs: 2}" "report: {json: $work/grid.json}"
check "a grid sweep runs every combination" 0 "ok" -- sh -c "'$lazylab' run '$work/grid.yaml' -q >/dev/null && python3 -c \"
import json
r = json.load(open('$work/grid.json'))
cells = r['cells']
assert len(cells) == 12, len(cells)
ids = {(c['workload_params']['rows'], c['workload_params']['cols'], c['pipeline']) for c in cells}
assert len(ids) == 12, ids
assert {c['pipeline'] for c in cells} == {'base', 'planned[algo=naive]', 'planned[algo=linear-scan]'}
assert all(c['status'] == 'ok' for c in cells)
print('ok')\""
check "--set and --filter" 0 "ok" -- sh -c "'$lazylab' run '$work/grid.yaml' -q --set 'workloads[0].params.rows=[2]' \
  --set repeat.runs=3 --filter 'pipeline=*linear*,workload=softmax' >/dev/null && python3 -c \"
import json
r = json.load(open('$work/grid.json'))
cells = r['cells']
assert sorted(c['pipeline'] for c in cells) == ['base', 'base', 'planned[algo=linear-scan]', 'planned[algo=linear-scan]'], [c['pipeline'] for c in cells]
assert all(c['workload_params']['rows'] == 2 and len(c['samples']['step_ms']) == 3 for c in cells)
assert r['experiment']['overrides'] == ['workloads[0].params.rows=[2]', 'repeat.runs=3'], r['experiment']['overrides']
print('ok')\""
check "a filter that matches nothing" 1 "no cell matches --filter backend=cuda" -- \
  "$lazylab" run "$work/grid.yaml" --filter backend=cuda
check "a filter with an unknown key" 1 "unknown key 'pipline' \(did you mean 'pipeline'\?\)" -- \
  "$lazylab" run "$work/grid.yaml" --filter pipline=base
check "--set with a bad key path" 1 "--set workloads\[3\].name: no list item \[3\] there" -- \
  "$lazylab" run "$work/grid.yaml" --set 'workloads[3].name=chain'

# Shards: each runs its share; merged, they hold what one run holds.
experiment "$work/shards.yaml" "name: shards" \
  "workloads: [{name: softmax, params: {rows: [4, 8, 16], cols: 16}}, chain-tiny]" \
  "pipelines: {eager: 'decompose,lower', fused: 'decompose,fuse{strategy=greedy-elementwise},lower'}" \
  "backends: [interp, cpu]" "repeat: {warmup: 0, runs: 2}" "report: {json: shards.json, markdown: shards.md}"
check "the whole run" 0 "wrote" -- "$lazylab" run "$work/shards.yaml" -q -o "$work/whole"
for i in 1 2 3; do
  check "shard $i/3" 0 "wrote" -- "$lazylab" run "$work/shards.yaml" -q --shard $i/3 -o "$work/shard$i"
done
check "merge the shards" 0 "wrote .*merged/shards.json" -- "$lazylab" merge "$work/shard2/shards.json" \
  "$work/shard1/shards.json" "$work/shard3/shards.json" -o "$work/merged"
check "merged equals the whole run up to timings" 0 "ok" -- python3 -c "
import json
whole = json.load(open('$work/whole/shards.json'))['cells']
merged = json.load(open('$work/merged/shards.json'))
shard_sizes = [len(json.load(open('$work/shard%d/shards.json' % i))['cells']) for i in (1, 2, 3)]
assert sum(shard_sizes) == 16 and all(0 < n < 16 for n in shard_sizes), shard_sizes
keys = ['workload', 'workload_params', 'pipeline', 'pipeline_text', 'backend', 'backend_options', 'label', 'status',
        'kernels', 'arena_bytes', 'naive_arena_bytes', 'bytes_moved', 'minimum_bytes', 'flops', 'nodes_per_step']
strip = lambda c: {k: c[k] for k in keys}
assert [strip(c) for c in merged['cells']] == [strip(c) for c in whole], 'cells differ'
assert all(c['speedup_vs_baseline']['value'] > 0 for c in merged['cells'])
assert len(merged['merged_from']) == 3
print('ok')"
check "merge refuses a missing shard" 1 "shard 2/3 is missing" -- \
  "$lazylab" merge "$work/shard1/shards.json" "$work/shard3/shards.json" -o "$work/merged2"
check "merge refuses a shard twice" 1 "shard 1/3 given twice" -- \
  "$lazylab" merge "$work/shard1/shards.json" "$work/shard1/shards.json" -o "$work/merged2"
check "merge refuses a report that is not a shard" 1 "not a shard's report" -- \
  "$lazylab" merge "$work/whole/shards.json" -o "$work/merged2"
check "a bad shard" 1 "--shard '4/3': expected I/N with 1 <= I <= N" -- "$lazylab" run "$work/shards.yaml" --shard 4/3

# compare: a run against itself has no regression; against a run made 40%
# slower, exit 5 naming the cells.
check "compare a run with itself" 0 "16 no significant change" -- \
  "$lazylab" compare "$work/whole/shards.json" "$work/whole/shards.json"
# Two reports alike but for one cell's samples: 20 evenly spread, then 1.4x
# those (a run's own few samples are too noisy to pin a verdict on).
for scale in 1.0 1.4; do python3 -c "
import json
r = json.load(open('$work/whole/shards.json'))
for c in r['cells']:
    if c['pipeline'] == 'fused' and c['workload'] == 'chain-tiny':
        c['samples']['step_ms'] = [(1.0 + 0.01 * i) * $scale for i in range(20)]
        c['samples']['device_ms'] = [0.0] * 20
json.dump(r, open('$work/scaled-$scale.json', 'w'))"; done
check "compare finds a regression" 5 "chain-tiny / fused / cpu +1.400x .*SLOWER" -- \
  "$lazylab" compare "$work/scaled-1.0.json" "$work/scaled-1.4.json"
check "compare with a bad threshold" 2 "--threshold must be between 0 and 10" -- \
  "$lazylab" compare "$work/scaled-1.0.json" "$work/scaled-1.4.json" --threshold -1

# Validation names the YAML line and key, with "did you mean".
experiment "$work/typo-pass.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'canonicalise,lower'}" "backends: [interp]"
check "a mistyped pass" 1 "typo-pass.yaml:3: pipelines.p: pipeline 'canonicalise,lower': unknown pass 'canonicalise' \(did you mean 'canonicalize'\?\)" -- \
  "$lazylab" run "$work/typo-pass.yaml"
experiment "$work/typo-backend.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp, cpus]"
check "a mistyped backend" 1 "typo-backend.yaml:4: backends\[1\]: backend 'cpus': no lazylab-backend-cpus.so in the plugin path .*\(did you mean 'cpu'\?\)" -- \
  "$lazylab" run "$work/typo-backend.yaml"
experiment "$work/typo-workload.yaml" "name: t" "workloads: [chain-tiny, sofmax]" "pipelines: {p: lower}" "backends: [interp]"
check "a mistyped workload" 1 "typo-workload.yaml:2: workloads\[1\]: unknown workload 'sofmax' \(did you mean 'softmax'\?\)" -- \
  "$lazylab" run "$work/typo-workload.yaml"
experiment "$work/typo-option.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'fuse{stratgy=none},lower'}" "backends: [interp]"
check "a mistyped pass option" 1 "pass 'fuse' has no option 'stratgy' \(did you mean 'strategy'\?\)" -- \
  "$lazylab" run "$work/typo-option.yaml"
experiment "$work/typo-backend-option.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [{name: cpu, options: 'thread=1'}]"
check "a mistyped backend option" 1 "backend 'cpu' has no option 'thread' \(did you mean 'threads'\?\) \(options: threads, tile, stream, strict, row-groups, direct-conv, openblas-core\)" -- \
  "$lazylab" run "$work/typo-backend-option.yaml"
experiment "$work/typo-key.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backend: [interp]"
check "a mistyped key" 1 "typo-key.yaml:4: backend: unknown key \(did you mean 'backends'\?\)" -- "$lazylab" run "$work/typo-key.yaml"
check "validation comes before any measurement" 1 "^lazylab: [^ ]*typo-workload.yaml" -- \
  sh -c "'$lazylab' run '$work/typo-workload.yaml' 2>&1 | grep -v '^lazylab: running' | head -1; exit 1"
check "an experiment path that is a folder" 1 "is a folder, not an experiment file" -- "$lazylab" run "$work"

# The JSON report is the one source: it follows experiments/report.schema.json
# (checked with Python's jsonschema, Debian's python3-jsonschema), and
# `lazylab report` renders every format from it, as the run did.
schema_python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import jsonschema" 2>/dev/null; then schema_python=$candidate; break; fi
done
check "a Python with jsonschema is installed (bash .ci/setup)" 0 "" -- test -n "$schema_python"
cat > "$work/validate.py" <<'PY'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    validator.validate(json.load(open(path)))
broken = json.load(open(sys.argv[2]))
broken["cells"][0]["status"] = "fine"
del broken["experiment"]["entries"]
assert len(list(validator.iter_errors(broken))) == 2, "the schema misses a broken report"
print("valid:", len(sys.argv) - 2)
PY
check "reports follow the JSON schema" 0 "valid: 2" -- "${schema_python:-python3}" "$work/validate.py" \
  experiments/report.schema.json "$work/qs/quickstart.json" tests/data/report-fixture.json
check "the run's Markdown is the JSON rendered again" 0 "" -- \
  bash -c "'$lazylab' report '$work/qs/quickstart.json' --format md | cmp - '$work/qs/quickstart.md'"
check "the run's CSV is the JSON rendered again" 0 "" -- \
  bash -c "'$lazylab' report '$work/qs/quickstart.json' --format csv | cmp - '$work/qs/quickstart.csv'"
check "the run's HTML is the JSON rendered again" 0 "" -- \
  bash -c "'$lazylab' report '$work/qs/quickstart.json' --format html | cmp - '$work/qs/quickstart.html'"
check "report writes a file" 0 "wrote $work/fixture.csv" -- \
  "$lazylab" report tests/data/report-fixture.json -f csv -o "$work/fixture.csv"
cat > "$work/read_csv.py" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 8, len(rows)
assert rows[0]["workload"] == 'soft|max "small"', rows[0]["workload"]
assert rows[0]["pipeline_text"] == "decompose,fuse{strategy=none},lower", rows[0]
assert float(rows[3]["time_ms"]) > 0 and float(rows[3]["speedup"]) > 1, rows[3]
failed = rows[7]
assert failed["status"] == "failed" and failed["time_ms"] == "" and failed["correct"] == "false", failed
assert failed["error"].startswith("step 1: execute: cpu:"), failed["error"]
print("csv rows:", len(rows))
PY
check "the CSV reads back with Python's csv module" 0 "csv rows: 8" -- python3 "$work/read_csv.py" "$work/fixture.csv"
check "report prints the console table" 0 "peer jax: NOT RUN" -- "$lazylab" report tests/data/report-fixture.json
check "report with an unknown format" 2 "unknown report format 'pdf' \(formats: console, md, csv, html\)" -- \
  "$lazylab" report tests/data/report-fixture.json --format pdf
check "report of a missing file" 1 "nothing.json: cannot open report" -- "$lazylab" report "$work/nothing.json"
printf '{"schema_version": 1}' > "$work/old.json"
check "report of an old schema" 1 "report schema version 1, this lazylab reads versions 2 to 3" -- \
  "$lazylab" report "$work/old.json"

# Without a report: key, every format goes to lazylab-reports/NAME-TIME (or
# -o DIR), and the run says where.
mkdir -p "$work/default"
experiment "$work/default/e.yaml" "name: my run" "workloads: [{name: chain-tiny, params: {n: 16}}]" \
  "pipelines: {p: lower}" "backends: [interp]" "repeat: {warmup: 0, runs: 1}"
check "reports go to a default folder" 0 "wrote lazylab-reports/my-run-[0-9]{8}-[0-9]{6}/my-run.csv" -- \
  bash -c "cd '$work/default' && '$lazylab' run e.yaml -q"
check "the default folder has every format" 0 "my-run.html" -- \
  bash -c "ls '$work/default'/lazylab-reports/my-run-*/my-run.{json,md,csv,html}"
check "-o DIR without a report: key" 0 "wrote $work/dflt/my-run.json" -- "$lazylab" run "$work/default/e.yaml" -q -o "$work/dflt"
check "progress in a pipe: a line per cell with its count and times" 0 \
  "^  \[1/1\] chain-tiny / p / interp: [0-9.]+ ms ok \([0-9]+:[0-9]{2} elapsed\)$" -- \
  "$lazylab" run "$work/default/e.yaml" -o "$work/dflt2"
check "--quiet: no progress" 1 "" -- bash -c "'$lazylab' run '$work/default/e.yaml' -o '$work/dflt3' -q 2>&1 | grep -F '[1/1]'"
check "--resume without a report: key needs -o DIR" 1 "give the interrupted run's folder with -o DIR" -- \
  bash -c "cd '$work/default' && '$lazylab' run e.yaml --resume -q"
check "a run that fails leaves no folder" 2 "unknown pass 'bogus'|cannot access 'lazylab-reports'" -- \
  bash -c "cd '$work/default' && rm -rf lazylab-reports && '$lazylab' run e.yaml --set 'pipelines={p: bogus}' -q; ls lazylab-reports"

# Malformed experiments: a clear error, exit 1, and no report.
experiment "$work/bad-key.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" "colour: blue" \
  "report: {json: r.json}"
check "unknown YAML key" 1 "bad-key.yaml:5: colour: unknown key" -- "$lazylab" run "$work/bad-key.yaml" -o "$work/out1"
check "no report after an error" 1 "" -- test -e "$work/out1/r.json"
experiment "$work/bad-type.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" "repeat: {runs: lots}"
check "wrong YAML type" 1 "repeat.runs: expected an integer, got 'lots'" -- "$lazylab" run "$work/bad-type.yaml"
experiment "$work/bad-yaml.yaml" "name: t" "workloads: [chain-tiny" "pipelines: {p: lower}"
check "malformed YAML" 1 "bad-yaml.yaml:3:[0-9]+: malformed YAML" -- "$lazylab" run "$work/bad-yaml.yaml"
experiment "$work/bad-pass.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'cse,bogus,lower'}" "backends: [interp]" \
  "report: {json: r.json}"
check "unknown pass in a pipeline" 1 "pipelines.p: pipeline 'cse,bogus,lower': unknown pass 'bogus'" -- \
  "$lazylab" run "$work/bad-pass.yaml" -o "$work/out2"
check "no report after a pipeline error" 1 "" -- test -e "$work/out2/r.json"
experiment "$work/bad-option.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'fuse{strategy=magic},lower'}" "backends: [interp]"
check "bad pass option" 1 "option 'strategy' expects one of \{dominator, flash-attention, gemm-epilogue, greedy-elementwise, horizontal, none, producer-consumer\}, got 'magic'" -- "$lazylab" run "$work/bad-option.yaml"
check "a memory budget below what recomputation reaches" 1 \
  "remat\{bytes=0,of=0,percent=30,strategy=memory-budget\}: rematerialization strategy 'memory-budget': a budget of 120 bytes is below the lowest peak it reaches, 128 bytes \(save-all's estimate: 400 bytes\)" -- \
  "$lazylab" show "$src/tests/passes/remat-memory-budget.lzir" \
  --pipeline 'decompose,grad{wrt=1:2},canonicalize,cse,dce,remat{strategy=memory-budget,percent=30}'
experiment "$work/bad-backend.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [nope]"
check "missing backend plugin" 1 "backend 'nope': no lazylab-backend-nope.so in the plugin path" -- "$lazylab" run "$work/bad-backend.yaml"
experiment "$work/bad-pass-plugin.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "plugins: [$test_build/lazylab-pass-wrong-api.so]"
check "pass plugin for another API version" 1 \
  "bad-pass-plugin.yaml:5: plugins\[0\]: pass plugin .*lazylab-pass-wrong-api.so: it was built for pass plugin API 46, this lazylab speaks 5" \
  -- "$lazylab" run "$work/bad-pass-plugin.yaml"
check "--load-plugin with a taken name" 1 "it registers pass 'cse', which a built-in provides already; nothing of it was registered" \
  -- "$lazylab" passes --load-plugin "$test_build/lazylab-pass-duplicate.so"
check "--load-plugin without the entry point" 1 "missing entry point 'lazylab_pass_plugin_info'" \
  -- "$lazylab" show chain-tiny --pipeline lower --load-plugin="$test_build/lazylab-backend-failing.so"
experiment "$work/abi.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [$test_build/lazylab-backend-wrongabi.so]"
check "wrong plugin ABI" 1 "built for plugin ABI 1.0, this lazylab speaks 3\.[0-9]+; rebuild it" -- "$lazylab" run "$work/abi.yaml"
experiment "$work/prepare.yaml" "name: t" "prepare: [sh, -c, 'touch made; exit 3']" "workloads: [chain-tiny]" \
  "pipelines: {p: lower}" "backends: [interp]"
check "a failing prepare step stops the run, naming it" 1 "prepare.yaml:2: prepare: 'sh' exited with status 3" -- \
  "$lazylab" run "$work/prepare.yaml"
check "the prepare step ran in the experiment's folder" 0 "" -- test -f "$work/made"
experiment "$work/prepare-list.yaml" "name: t" "prepare: make" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [interp]"
check "prepare wants a command list" 1 "prepare-list.yaml:2: prepare: expected a non-empty list" -- \
  "$lazylab" run "$work/prepare-list.yaml"
experiment "$work/bad-param.yaml" "name: t" "workloads: [{name: softmax, params: {colums: 3}}]" "pipelines: {p: lower}" "backends: [interp]"
check "unknown workload parameter" 1 "workload 'softmax' has no parameter 'colums'" -- "$lazylab" run "$work/bad-param.yaml"
check "missing experiment file" 1 "nowhere.yaml: cannot open an experiment file" -- "$lazylab" run "$work/nowhere.yaml"
experiment "$work/nolower.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: cse}" "backends: [interp]"
check "pipeline without lower" 1 "pipelines.p: 'cse' does not lower the graph to a Program; end it with 'lower'" -- \
  "$lazylab" run "$work/nolower.yaml"
experiment "$work/order.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'lower,cse'}" "backends: [interp]"
check "a graph pass after lower" 1 "pass 'cse' works on the graph, but comes after 'lower'" -- "$lazylab" run "$work/order.yaml"

# A result outside tolerance: the report is still complete, marked, exit 3.
experiment "$work/strict.yaml" "name: t" "workloads: [{name: softmax, params: {rows: 4, cols: 64}}]" \
  "pipelines: {p: 'decompose,lower'}" "backends: [interp]" "reference: {rtol: 0, atol: 0}" "report: {json: strict.json}"
check "mismatch exits 3" 3 "MISMATCH|do not match the reference" -- "$lazylab" run "$work/strict.yaml" -o "$work/out3"
check "mismatch report is written and marked" 0 "all_correct\": false" -- cat "$work/out3/strict.json"

# A cell that fails is recorded with its reason and the run goes on: the
# other cells are measured, the report says how many failed, exit 4.
experiment "$work/failing.yaml" "name: t" "workloads: [{name: chain-tiny, params: {n: 64}}, {file: axpy.lzir}]" \
  "pipelines: {eager: lower, fused: 'fuse{strategy=greedy-elementwise},lower'}" \
  "backends: [interp, $test_build/lazylab-backend-failing.so]" "repeat: {warmup: 1, runs: 3}" \
  "report: {json: $work/failing.json, markdown: $work/failing.md}"
cp experiments/workloads/axpy.lzir "$work/axpy.lzir"
check "failed cells do not stop the run" 4 "4 of 8 cells failed" -- "$lazylab" run "$work/failing.yaml"
check "failed cells are in the report with their reason" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/failing.json'))
assert r['cell_counts'] == {'total': 8, 'ok': 4, 'mismatch': 0, 'failed': 4, 'crashed': 0, 'noisy': r['cell_counts']['noisy']}, r['cell_counts']
for c in r['cells']:
    if c['backend'] == 'interp':
        assert c['status'] == 'ok' and len(c['samples']['step_ms']) == 3, c
    else:
        assert c['status'] == 'failed' and c['error'], c
        assert c['speedup_vs_baseline']['value'] == 0, c
assert not any(c['backend'] == 'interp' and c['error'] for c in r['cells'])
print('ok')"
check "the markdown report warns about failed cells" 0 "Warning: 4 of 8 cells failed" -- cat "$work/failing.md"
check "no partial results are left behind" 1 "" -- test -e "$work/failing.json.partial"

# Statistics: raw samples, medians and speedups with their intervals,
# interleaved rounds.
check "samples, intervals and verdicts" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/failing.json'))
assert r['experiment']['interleave'] is True
for c in r['cells']:
    if c['status'] != 'ok': continue
    t = c['time_ms']
    assert t['low'] <= t['value'] <= t['high'] and t['value'] > 0, t
    s = c['speedup_vs_baseline']
    assert s['low'] <= s['value'] <= s['high'], s
    assert s['verdict'] in ('lower', 'higher', 'no significant difference'), s
assert 'copies with non-temporal stores' in r['ceilings']['method'], r['ceilings']
print('ok')"

# Reports: their paths are checked before anything runs; a failed run
# leaves an earlier report as it was.
experiment "$work/samepath.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "report: {json: $work/same.txt, markdown: $work/same.txt}"
check "one path for two reports is refused" 1 "two report formats would be written to the same file" -- \
  "$lazylab" run "$work/samepath.yaml"
check "an unwritable report folder is refused first" 1 "cannot write reports into '/proc'" -- \
  "$lazylab" run "$work/failing.yaml" -o /proc/lazylab
experiment "$work/huge-runs.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "repeat: {runs: 4294967297}"
experiment "$work/negative.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "cache: {capacity: -1}"
check "a negative count is named as such" 1 "negative.yaml:5: cache.capacity: expected an integer \(not negative\), got '-1'" -- \
  "$lazylab" run "$work/negative.yaml"
printf 'name: "caf\xe9 \xff"\nworkloads: [{name: chain-tiny, params: {n: 16}}]\npipelines: {p: lower}\nbackends: [interp]\nrepeat: {warmup: 0, runs: 1}\nreport: {json: %s}\n' "$work/latin1.json" > "$work/latin1.yaml"
check "a name that is not UTF-8 still gives a report" 0 "wrote .*latin1.json" -- "$lazylab" run "$work/latin1.yaml" -q
check "absurd repeat counts are refused" 1 "repeat: needs 0 <= warmup <= 1000000, 1 <= runs <= 1000000" -- \
  "$lazylab" run "$work/huge-runs.yaml"
cp "$work/failing.json" "$work/failing.before"
experiment "$work/failing-later.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'cse,bogus,lower'}" \
  "backends: [interp]" "report: {json: $work/failing.json}"
check "a run that fails keeps the earlier report" 0 "" -- \
  sh -c "! '$lazylab' run '$work/failing-later.yaml' -q && cmp '$work/failing.json' '$work/failing.before'"

# --ceilings pins the machine's ceilings from an earlier report.
check "pinned ceilings" 0 "pinned from .*failing.before" -- \
  sh -c "'$lazylab' run '$work/failing.yaml' -q --ceilings '$work/failing.before' -o '$work/pinned'; cat '$work/pinned/failing.json'"
check "pinned ceilings are the earlier run's" 0 "ok" -- python3 -c "
import json
a = json.load(open('$work/failing.before'))['ceilings']; b = json.load(open('$work/pinned/failing.json'))['ceilings']
assert a['copy_gb_s'] == b['copy_gb_s'] and a['sgemm_gflop_s'] == b['sgemm_gflop_s'], (a, b)
print('ok')"
check "--ceilings with a missing file" 1 "--ceilings: .*nothing.json: cannot open report" -- \
  "$lazylab" run "$work/failing.yaml" --ceilings "$work/nothing.json"

# --resume continues from the partial results of an interrupted run: the
# cells there are kept, the others run.
mkdir -p "$work/resumed" && python3 -c "
import json
r = json.load(open('$work/failing.before'))
r['cells'] = [c for c in r['cells'] if c['workload'] == 'chain-tiny']
for c in r['cells']: c['compile_ms'] = 12345.5
json.dump(r, open('$work/resumed/failing.json.partial', 'w'))"
check "resume takes the finished cells" 4 "4 cells resumed from" -- \
  bash -c "set -o pipefail; '$lazylab' run '$work/failing.yaml' -o '$work/resumed' --resume 2>&1 | tee '$work/resumed.log'"
check "progress counts only the cells a resumed run measures" 0 "^  \[4/4\] " -- cat "$work/resumed.log"
check "resumed and new cells are in one report" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/resumed/failing.json'))
assert len(r['cells']) == 8, len(r['cells'])
kept = [c for c in r['cells'] if c['compile_ms'] == 12345.5]
assert len(kept) == 4 and all(c['workload'] == 'chain-tiny' for c in kept), kept
print('ok')"
mkdir -p "$work/stale" && cp "$work/failing.before" "$work/stale/failing.json.partial"
sed 's/runs: 3/runs: 4/' "$work/failing.yaml" > "$work/stale/failing.yaml"
check "resume refuses results of another experiment version" 1 "is from a different version of" -- \
  "$lazylab" run "$work/stale/failing.yaml" -o "$work/stale" --resume
check "resume without partial results" 1 "--resume: .*cannot open report" -- \
  "$lazylab" run "$work/failing.yaml" -o "$work/fresh" --resume

# --isolate: a backend that segfaults in execute marks its cells crashed;
# the other cells and the report survive.
experiment "$work/crash.yaml" "name: t" "workloads: [{name: chain-tiny, params: {n: 64}}]" \
  "pipelines: {eager: lower, fused: 'fuse{strategy=greedy-elementwise},lower'}" \
  "backends: [interp, {name: $test_build/lazylab-backend-failing.so, options: crash=1}]" \
  "repeat: {warmup: 1, runs: 3}" "report: {json: $work/crash.json}"
check "isolated cells survive a crashing backend" 4 "2 of 4 cells failed" -- "$lazylab" run "$work/crash.yaml" --isolate
check "crashed cells name the signal" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/crash.json'))
assert r['experiment']['isolate'] is True and r['experiment']['interleave'] is False, r['experiment']
assert r['cell_counts']['crashed'] == 2 and r['cell_counts']['ok'] == 2, r['cell_counts']
for c in r['cells']:
    if c['backend'] == 'interp':
        assert c['status'] == 'ok' and len(c['samples']['step_ms']) == 3 and c['floor_fraction'] > 0, c
    else:
        assert c['status'] == 'crashed' and 'signal 11' in c['error'], c['error']
print('ok')"

# Without --isolate, a backend plugin lazylab does not ship is loaded and
# created in a child first, and its cells run in children: one that crashes
# in create (or while loading, or aborts) or in execute fails its own cells,
# named, and the others run interleaved in this process; the report is whole.
for crash in "crash=1:crashed (signal 11" "crash-in-create=1:crashed while creating (signal 11: Segmentation fault)" \
             "abort-in-create=1:crashed while creating (signal 6: Aborted)"; do
  option=${crash%%:*} message=${crash#*:}
  experiment "$work/contained.yaml" "name: t" "workloads: [{name: chain-tiny, params: {n: 64}}]" \
    "pipelines: {eager: lower, fused: 'fuse{strategy=greedy-elementwise},lower'}" \
    "backends: [interp, {name: $test_build/lazylab-backend-failing.so, options: $option}]" \
    "repeat: {warmup: 1, runs: 3}" "report: {json: $work/contained.json}"
  check "a plugin that crashes ($option) fails only its cells" 4 "2 of 4 cells failed" -- \
    "$lazylab" run "$work/contained.yaml" -q
  check "... named, the others interleaved and ok ($option)" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/contained.json'))
assert r['experiment']['isolate'] is False and r['experiment']['interleave'] is True, r['experiment']
assert r['cell_counts']['crashed'] == 2 and r['cell_counts']['ok'] == 2, r['cell_counts']
for c in r['cells']:
    if c['backend'] == 'interp':
        assert c['status'] == 'ok' and len(c['samples']['step_ms']) == 3, c
    else:
        assert c['status'] == 'crashed' and '$message' in c['error'], c['error']
assert any('not shipped with lazylab' in d for d in r['backend_devices']), r['backend_devices']
print('ok')"
done
experiment "$work/crashload.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [interp, $test_build/lazylab-backend-crashload.so]" "report: {json: $work/crashload.json}"
check "a plugin that crashes while it loads fails its cells" 4 "crashload.so crashed while loading \(signal 11" -- \
  "$lazylab" run "$work/crashload.yaml"
experiment "$work/nulldevice.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [$test_build/lazylab-backend-nulldevice.so]"
check "a NULL device description is an error naming the plugin" 1 \
  "nulldevice.yaml:4: backends\[0\]: backend plugin .*lazylab-backend-nulldevice.so: device_description returned NULL" -- \
  "$lazylab" run "$work/nulldevice.yaml"
check "--trust-plugins loads plugins here: an abort in create ends the run" 134 "" -- \
  "$lazylab" run "$work/contained.yaml" -q --trust-plugins
check "--isolate and --trust-plugins contradict" 1 "contradict" -- \
  "$lazylab" run "$work/contained.yaml" --isolate --trust-plugins

# lazylab fuzz: a backend that fails everything is caught on every graph; each
# failure is reduced and written with an experiment that reproduces it.
check "fuzz finds and reduces failures" 6 "fuzz: 3 graphs .* [1-9][0-9]* failures" -- \
  "$lazylab" fuzz --graphs 3 --backends "$test_build/lazylab-backend-failing.so" -o "$work/fuzz"
check "a reduced failure is small" 0 "ok" -- python3 -c "
import glob
files = glob.glob('$work/fuzz/fuzz-*.lzir')
assert files, 'no reduced graphs written'
for f in files:
    nodes = [l for l in open(f) if ' = ' in l]
    assert len(nodes) <= 3, (f, nodes)
print('ok')"
check "the written experiment reproduces it" 4 "device on fire|cannot run" -- \
  sh -c "'$lazylab' run \$(ls '$work'/fuzz/fuzz-*.yaml | head -1) -q -o '$work/fuzz-run'"
check "fuzz with a clean backend" 0 "fuzz: 20 graphs .* 0 failures" -- "$lazylab" fuzz --graphs 20 -q
check "fuzz with a bad count" 2 "--graphs must be between 1 and 100000000" -- "$lazylab" fuzz --graphs 0

# Every step is checked, not only the last: a backend wrong on its third
# step (of six) is caught and the step named.
printf 'graph @identity {\n  %%x = parameter {ordinal = 0} : f32[8]\n  %%y = reshape(%%x) : f32[2,4]\n  return %%y\n}\n' \
  > "$work/identity.lzir"
experiment "$work/flaky.yaml" "name: t" "workloads: [{file: identity.lzir}]" "pipelines: {p: lower}" \
  "backends: [{name: $test_build/lazylab-backend-failing.so, options: flaky=1}]" "repeat: {warmup: 1, runs: 4}" \
  "report: {json: $work/flaky.json}"
check "a wrong step before the last is caught" 3 "MISMATCH|do not match" -- "$lazylab" run "$work/flaky.yaml"
check "the report names the wrong step" 0 "step 2: output 0 element 0" -- cat "$work/flaky.json"

# A program of the 16-bit floats and 8-bit integers runs on interp and cpu,
# each cell checked with its dtype's tolerance, which the report states; a
# backend of an older ABI refuses bf16 by name.
printf '%s\n' 'graph @mixed {' '  %x = parameter {ordinal = 0} : bf16[4, 8]' '  %y = parameter {ordinal = 1} : f16[4, 8]' \
  '  %a = exp(%x) : bf16[4, 8]' '  %b = cast(%y) : bf16[4, 8]' '  %c = add(%a, %b) : bf16[4, 8]' \
  '  %s = softmax(%c) {axis = 1} : bf16[4, 8]' '  %i = parameter {ordinal = 2} : u8[4, 8]' \
  '  %j = cast(%i) : bf16[4, 8]' '  %r = mul(%s, %j) : bf16[4, 8]' '  %k = parameter {ordinal = 3} : i8[4, 8]' \
  '  %l = add(%k, %k) : i8[4, 8]' '  return %r, %l' '}' > "$work/mixed.lzir"
experiment "$work/mixed.yaml" "name: mixed" "workloads: [{file: mixed.lzir}]" \
  "pipelines: {eager: 'decompose,lower', fused: 'decompose,canonicalize,fuse{strategy=producer-consumer},lower,plan-memory'}" \
  "backends: [interp, cpu]" "repeat: {warmup: 0, runs: 2}" "report: {markdown: $work/mixed.md}"
check "bf16, f16, i8 and u8 run on interp and cpu, every cell checked" 0 "mixed.lzir +fused +cpu .* ok" -- \
  "$lazylab" run "$work/mixed.yaml"
check "the report states the 16-bit floats' tolerances" 0 "bf16 results: rtol 0.016, atol 1e-05; f16 results: rtol 0.001" -- \
  cat "$work/mixed.md"
experiment "$work/mixed-older.yaml" "name: mixed" "workloads: [{file: mixed.lzir}]" "pipelines: {eager: 'decompose,lower'}" \
  "backends: [$test_build/lazylab-backend-olderminor.so]" "repeat: {warmup: 0, runs: 1}" \
  "report: {markdown: $work/mixed-older.md}"
check "a backend of an older ABI refuses bf16 by name" 4 "backend olderminor does not compute in bf16" -- \
  "$lazylab" run "$work/mixed-older.yaml"

# peers: run after the cells, in the experiment's folder, beside the
# fastest correct cell; a failing peer is reported and loses nothing else.
cp tests/cli/fake_peer.py "$work/fake_peer.py"
experiment "$work/peers.yaml" "name: peers" "workloads: [{name: chain-tiny, params: {n: 256}}, {file: axpy.lzir}]" \
  "pipelines: {eager: 'lower', fused: 'fuse{strategy=greedy-elementwise},lower'}" "backends: [interp]" \
  "repeat: {warmup: 1, runs: 3}" "peers: {fake: [python3, fake_peer.py], broken: [python3, fake_peer.py, --fail=3]}" \
  "report: {json: $work/peers.json, markdown: $work/peers.md}"
cp experiments/workloads/axpy.lzir "$work/axpy.lzir"
check "peers run beside the cells" 0 "chain-tiny +fake +host +[0-9.]+ +(eager|fused) / interp" -- "$lazylab" run "$work/peers.yaml"
check "a failing peer is reported, not fatal" 0 \
  "peer broken: NOT RUN: 'python3' exited with status 3: RuntimeError: the fake peer was told to fail" -- \
  "$lazylab" run "$work/peers.yaml" -q
check "a failing peer is one progress line; its stderr goes beside the report" 0 \
  "^  peer broken: failed: .*status 3: RuntimeError: the fake peer was told to fail$" -- \
  bash -c "'$lazylab' run '$work/peers.yaml' 2>&1 >/dev/null; grep -c 'noise line' '$work/peers.peer-broken.stderr'"
check "a failing peer's stderr is not in the progress output" 1 "" -- \
  bash -c "'$lazylab' run '$work/peers.yaml' 2>&1 >/dev/null | grep -F -e 'noise line' -e Traceback"
check "peer report sections" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/peers.json'))
fake, broken = r['peers']
assert fake['error'] == '' and broken['error'].endswith('status 3: RuntimeError: the fake peer was told to fail'), r['peers']
assert broken['stderr'].count('noise line') == 50 and fake['stderr'] == '', r['peers']
assert 'cwd ' + '$(basename "$work")' in fake['description'], fake['description']
assert \"['chain-tiny.n']\" in fake['description'], fake['description']
assert '--workloads=chain-tiny' in fake['command'] and '--runs=3' in fake['command'], fake['command']
[cell] = fake['cells']
best = min((c for c in r['cells'] if c['workload'] == 'chain-tiny'), key=lambda c: c['step_ms']['median'])
assert cell['best_lazylab']['pipeline'] == best['pipeline'], (cell, best['pipeline'])
assert abs(cell['best_lazylab']['peer_over_lazylab'] - cell['step_ms']['median'] / best['step_ms']['median']) < 1e-9
print('ok')"
check "peers in the markdown report" 0 "\| chain-tiny \| fake \| host \| [0-9.]+ \| (eager|fused) / interp \|" -- cat "$work/peers.md"
# inputs: bf16: a workload's f32 inputs stored in bf16 is an entry of its
# own, checked against the reference run on the same inputs; a peer whose
# cells say they ran on bf16 inputs is set beside that entry's cells.
experiment "$work/stored.yaml" "name: stored" \
  "workloads: [{name: mlp, params: {batch: 4, d: 8, hidden: 16}}, {name: mlp, params: {batch: 4, d: 8, hidden: 16}, inputs: bf16}]" \
  "pipelines: {f32: 'decompose,lower', autocast: 'autocast,decompose,canonicalize,cse,dce,fuse,lower'}" \
  "backends: [interp, cpu]" \
  "repeat: {warmup: 1, runs: 3}" "reference: {rtol: 0.02, atol: 0.001}" \
  "peers: {f32: [python3, fake_peer.py], bf16: [python3, fake_peer.py, --inputs=bf16]}" \
  "report: {json: $work/stored.json, markdown: $work/stored.md}"
check "inputs stored in bf16 run as an entry of their own" 0 "mlp \(bf16 inputs\) +autocast +cpu" -- \
  "$lazylab" run "$work/stored.yaml"
check "a peer on bf16 inputs is set beside the bf16 entry" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/stored.json'))
assert all(c['status'] == 'ok' for c in r['cells']), [(c['workload_shown'], c['status']) for c in r['cells']]
entries = r['experiment']['entries']['workloads']
assert [w['inputs'] for w in entries] == ['', 'bf16'], entries
shown = sorted({c['workload_shown'] for c in r['cells']})
assert shown == ['mlp', 'mlp (bf16 inputs)'], shown
for peer, entry in (('f32', 'mlp'), ('bf16', 'mlp (bf16 inputs)')):
    [cell] = next(p for p in r['peers'] if p['name'] == peer)['cells']
    fastest = min(c['step_ms']['median'] for c in r['cells'] if c['workload_shown'] == entry)
    assert cell['best_lazylab']['step_ms'] == fastest, (peer, cell, fastest)
    assert cell.get('inputs', '') == ('bf16' if peer == 'bf16' else ''), cell
print('ok')"
check "the peer table names the entry it compares with" 0 "\| mlp \(bf16 inputs\) \| bf16 \| host" -- cat "$work/stored.md"
# peer-rounds: each peer times each workload beside its cells, in rounds of
# runs / R steps; its figure is the rounds' median, each round's ratio given.
experiment "$work/peer-rounds.yaml" "name: rounds" \
  "workloads: [{name: chain-tiny, params: {n: 256}}, {file: axpy.lzir}, {name: chain-small, params: {iters: 3}}]" \
  "pipelines: {eager: 'lower', fused: 'fuse{strategy=greedy-elementwise},lower'}" "backends: [interp]" \
  "repeat: {warmup: 1, runs: 6}" "peer-rounds: 3" "peers: {fake: [python3, fake_peer.py, --log=rounds.log]}" \
  "report: {json: $work/peer-rounds.json, markdown: $work/peer-rounds.md}"
rm -f "$work/rounds.log"
check "peers in rounds beside each workload's cells" 0 \
  "chain-tiny +fake +host +[0-9.]+ +(eager|fused) / interp +[0-9.]+ +[0-9.]+x +[0-9.]+-[0-9.]+x over 3" -- \
  "$lazylab" run "$work/peer-rounds.yaml"
check "peer rounds: each workload's rounds in turn, runs / R steps each" 0 "ok" -- python3 -c "
import json, statistics
log = open('$work/rounds.log').read().split('\n')[:-1]
assert log == ['chain-tiny 2'] * 3 + ['chain-small 2'] * 3, log
r = json.load(open('$work/peer-rounds.json'))
assert r['experiment']['peer_rounds'] == 3, r['experiment']
[fake] = r['peers']
assert fake['error'] == '' and len(fake['cells']) == 2, fake
for cell in fake['cells']:
    assert len(cell['rounds_ms']) == 3 and cell['step_ms']['median'] == statistics.median(cell['rounds_ms']), cell
    assert cell['step_ms']['min'] <= min(cell['rounds_ms']) and cell['step_ms']['max'] >= max(cell['rounds_ms']), cell
    best = cell['best_lazylab']
    samples = next(c for c in r['cells'] if c['workload'] == cell['workload'] and c['pipeline'] == best['pipeline'])['samples']
    want = [ms / statistics.median(samples['step_ms'][2 * k:2 * k + 2]) for k, ms in enumerate(cell['rounds_ms'])]
    assert all(abs(a - b) < 1e-9 * b for a, b in zip(best['round_ratios'], want)), (best, want)
# After each round the peers' workloads' cells warm up again (warm-up 1):
# three steps more than the cells of axpy.lzir, which no peer is given.
traces = {c['workload']: c['metrics']['traces'] for c in r['cells']}
assert traces['chain-tiny'] == traces['chain-small'] == traces[next(w for w in traces if 'axpy' in w)] + 3, traces
print('ok')"
check "peer rounds in the markdown report" 0 "\| chain-small \| fake \| host \| [0-9.]+ \| (eager|fused) / interp \| [0-9.]+ \| [0-9.]+x \| [0-9.]+-[0-9.]+x over 3 \|" -- \
  cat "$work/peer-rounds.md"
check "a report with peer rounds follows the JSON schema" 0 "valid: 1" -- "${schema_python:-python3}" \
  "$work/validate.py" experiments/report.schema.json "$work/peer-rounds.json"
check "peer rounds rendered again from the JSON as the run did" 0 "" -- \
  bash -c "'$lazylab' report '$work/peer-rounds.json' --format md | cmp - '$work/peer-rounds.md'"
experiment "$work/bad-rounds.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "repeat: {runs: 4}" "peer-rounds: 5"
check "peer-rounds at most repeat.runs" 1 "bad-rounds.yaml:6: peer-rounds: must be between 0 and repeat.runs \(4\), got 5" -- \
  "$lazylab" run "$work/bad-rounds.yaml"
experiment "$work/clock-peers.yaml" "name: clocks" "workloads: [{name: chain-tiny, params: {n: 256}}]" \
  "pipelines: {eager: 'lower'}" "backends: [interp]" "repeat: {warmup: 1, runs: 3}" \
  "peers: {gpu: [python3, fake_peer.py, --clock=device], wall: [python3, fake_peer.py, --clock=wall]}" \
  "report: {json: $work/clock-peers.json}"
check "a peer's report must name a clock it knows" 0 \
  "peer wall: NOT RUN: its report .* gives clock 'wall': it must be 'host' or 'device'" -- \
  "$lazylab" run "$work/clock-peers.yaml" -q
check "a device-clock peer meets a host-only backend on its host step" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/clock-peers.json'))
gpu = r['peers'][0]
assert gpu['clock'] == 'device' and r['peers'][1]['clock'] == 'host', r['peers']
[cell] = gpu['cells']
assert cell['best_lazylab']['timed_on_device'] is False, cell
assert cell['best_lazylab']['step_ms'] == r['cells'][0]['step_ms']['median'], (cell, r['cells'][0]['step_ms'])
print('ok')"
experiment "$work/bad-peer.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "peers: {torch: python3}"
check "a peer must be a command list" 1 "bad-peer.yaml:5: peers.torch: expected a non-empty list" -- \
  "$lazylab" run "$work/bad-peer.yaml"
experiment "$work/missing-peer.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "peers: {ghost: [no-such-peer-program]}" "report: {json: $work/missing.json}"
experiment "$work/hung-peer.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "peers: {stuck: [python3, fake_peer.py, --hang]}" "peer-timeout: 1" "report: {json: $work/hung.json}"
check "a peer that never finishes is killed at peer-timeout" 0 "peer stuck: NOT RUN: 'python3' did not finish in time" -- \
  timeout 60 "$lazylab" run "$work/hung-peer.yaml" -q
check "a peer that cannot start" 0 "peer ghost: NOT RUN: cannot start 'no-such-peer-program'" -- \
  "$lazylab" run "$work/missing-peer.yaml" -q
# A peer started through a shell: at its timeout the whole process group
# goes, the shell's child too (only the shell was killed before).
experiment "$work/shell-peer.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [interp]" \
  "peers: {shell: [sh, -c, 'sleep 300 & echo \$! > grandchild.pid; wait']}" "peer-timeout: 1" \
  "report: {json: $work/shell-peer.json}"
check "a timed-out peer's grandchild is killed with it" 0 "ok" -- sh -c "
  timeout 60 '$lazylab' run '$work/shell-peer.yaml' -q > /dev/null 2>&1
  python3 -c \"
import os, time
pid = int(open('$work/grandchild.pid').read())
def running():  # gone, or a zombie its new parent has yet to reap
    try: return open(f'/proc/{pid}/stat').read().split(')')[1].split()[0] != 'Z'
    except FileNotFoundError: return False
deadline = time.time() + 5
while running() and time.time() < deadline: time.sleep(0.05)
print('still running' if running() else 'ok')\""

# openblas-core, the cpu backend's option, chooses OpenBLAS's kernels; the
# report says which ran and who chose them, and the peers run the same.
experiment "$work/core.yaml" "name: t" "workloads: [{name: mlp, params: {batch: 4, d: 8, hidden: 16}}]" \
  "pipelines: {p: 'decompose,lower'}" "backends: [{name: cpu, options: openblas-core=Haswell}]" \
  "peers: {fake: [python3, fake_peer.py]}" "report: {json: $work/core.json}"
check "openblas-core chooses the kernels" 0 "core Haswell \(core type Haswell chosen by the cpu backend's openblas-core\)" -- \
  sh -c "'$lazylab' run '$work/core.yaml' -q && cat '$work/core.json'"
check "the peers run the kernels the cpu backend measured" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/core.json'))
assert r['ceilings']['peer_environment'] == ['OPENBLAS_CORETYPE=Haswell'], r['ceilings']
assert 'core Haswell,' in r['peers'][0]['description'], r['peers'][0]['description']
assert r['ceilings']['method'].startswith('measured at the start of the run by backend cpu: '), r['ceilings']
print('ok')"
experiment "$work/bad-core.yaml" "name: t" "workloads: [{name: mlp, params: {batch: 4, d: 8, hidden: 16}}]" \
  "pipelines: {p: 'decompose,lower'}" "backends: [{name: cpu, options: openblas-core=Pentium9}]" \
  "report: {json: $work/bad-core.json}"
check "an unknown openblas-core is reported" 0 "OpenBLAS does not run 'Pentium9' here and chose" -- \
  sh -c "'$lazylab' run '$work/bad-core.yaml' -q && cat '$work/bad-core.json'"
experiment "$work/two-cores.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: 'decompose,lower'}" \
  "backends: [{name: cpu, options: openblas-core=Haswell}, {name: cpu, options: openblas-core=SkylakeX}]"
check "two cpu backends asking for other kernels in one process" 1 \
  "backends\[1\]: .*openblas-core=SkylakeX: OpenBLAS is already loaded in this process \(core Haswell asked for\)" -- \
  "$lazylab" run "$work/two-cores.yaml"
experiment "$work/old-core.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [cpu]" \
  "openblas-core: auto"
check "the experiment's openblas-core points to the cpu backend's option" 1 \
  "old-core.yaml:5: openblas-core: is an option of the cpu backend now: backends: \[\{name: cpu, options: openblas-core=auto\}\]" -- \
  "$lazylab" run "$work/old-core.yaml"
# The host's ceilings come from the cpu backend even where the experiment
# does not list it.
experiment "$work/interp-ceilings.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [interp]" "repeat: {warmup: 1, runs: 2}" "report: {json: $work/interp-ceilings.json}"
check "an interp-only run's host ceilings, measured by the cpu backend" 0 "ok" -- sh -c "
  '$lazylab' run '$work/interp-ceilings.yaml' -q > /dev/null && python3 -c \"
import json
c = json.load(open('$work/interp-ceilings.json'))['ceilings']
assert c['copy_gb_s'] > 0 and c['sgemm_gflop_s'] > 0 and c['elementwise_gop_s'] > 0, c
assert 'by backend cpu' in c['method'] and c['peer_environment'][0].startswith('OPENBLAS_CORETYPE='), c
print('ok')\""

# cuda where there is no GPU: the plugin loads and is listed; creating a
# backend says what is missing, and nothing is measured or written.
cuda_plugin="$(dirname "$lazylab")/../backends/cuda/lazylab-backend-cuda.so"
if [[ -f $cuda_plugin && ! -e /dev/nvidiactl ]]; then
  check "cuda is listed without a GPU" 0 "cuda +Generated CUDA kernels" -- "$lazylab" backends
  experiment "$work/nogpu.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" "backends: [cuda]" \
    "report: {json: $work/nogpu.json}"
  check "cuda without a GPU is a clear error" 1 "cuda: no CUDA (driver|device)" -- "$lazylab" run "$work/nogpu.yaml"
  check "and writes no report" 1 "" -- test -e "$work/nogpu.json"
fi
if [[ -f $cuda_plugin ]]; then  # options are checked before anything else, GPU or not
  experiment "$work/cuda-option.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
    "backends: [{name: cuda, options: tf32=maybe}]"
  check "a bad cuda option names it" 1 "backend 'cuda': option 'tf32' expects on or off, got 'maybe'" -- "$lazylab" run "$work/cuda-option.yaml"
  experiment "$work/cuda-key.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
    "backends: [{name: cuda, options: colour=red}]"
  check "an unknown cuda option names the options" 1 "backend 'cuda' has no option 'colour' \\(options: tf32, cache, cache-dir, graph, bias-epilogue, gelu-epilogue, row-block, row-groups, wgmma, attention-rows\\)" -- \
    "$lazylab" run "$work/cuda-key.yaml"
  experiment "$work/cuda-graph.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
    "backends: [{name: cuda, options: graph=sometimes}]"
  check "a bad graph option names the choices" 1 "backend 'cuda': option 'graph' expects one of \\{auto, on, off\\}, got 'sometimes'" -- \
    "$lazylab" run "$work/cuda-graph.yaml"
  for value in 300 wide -256; do
    experiment "$work/cuda-row-block.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
      "backends: [{name: cuda, options: 'row-block=$value'}]"
    check "row-block=$value names the sizes" 1 "backend 'cuda': option 'row-block' expects one of \\{auto, 128, 256, 512, 1024\\}, got '$value'" -- \
      "$lazylab" run "$work/cuda-row-block.yaml"
  done
  experiment "$work/cuda-attention-rows.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
    "backends: [{name: cuda, options: 'attention-rows=64'}]"
  check "attention-rows=64 names the sizes" 1 "backend 'cuda': option 'attention-rows' expects one of \\{auto, 128, 256\\}, got '64'" -- \
    "$lazylab" run "$work/cuda-attention-rows.yaml"
fi

# repeat.flush: caches flushed on the cell's backend before each step, said
# in the report; the cell's own metrics do not count the flush.
experiment "$work/flush.yaml" "name: flush" "workloads: [{name: softmax, params: {rows: 16, cols: 64}}]" \
  "pipelines: {p: \"decompose,lower\"}" "backends: [cpu]" "repeat: {warmup: 1, runs: 3, profile: 0, flush: 8}" \
  "report: {json: $work/flush.json, markdown: $work/flush.md}"
check "a run with flushed caches" 0 "" -- "$lazylab" run "$work/flush.yaml" -q
check "the report says the steps ran after a flush" 0 "each after 8 MiB written, read back and written again on the cell's backend" -- \
  cat "$work/flush.md"
check "flush bytes in the results; host and device samples from alternate steps; no flush in the metrics" 0 "ok" -- python3 -c "
import json
r = json.load(open('$work/flush.json'))
assert r['experiment']['flush_bytes'] == 8 << 20, r['experiment']
c = r['cells'][0]
assert c['metrics']['traces'] == 8 and c['metrics']['cache_misses'] == 1, c['metrics']  # cold, warm-up, 2 x 3 timed
assert len(c['samples']['step_ms']) == 3 and len(c['samples']['device_ms']) == 3, c['samples']
# The host probed once a timed round; the floor in rounds is the floor at those medians.
assert c['rounds_copy_gb_s'] > 0 and c['rounds_sgemm_gflop_s'] > 0, c
floor = c['minimum_bytes'] / (c['rounds_copy_gb_s'] * 1e9) * 1e3
assert c['rounds_floor_ms'] >= floor * (1 - 1e-9), (c['rounds_floor_ms'], floor)  # at least the bytes at that rate
assert abs(c['rounds_floor_fraction'] - c['rounds_floor_ms'] / c['step_ms']['median']) < 1e-9, c
print('ok')"
check "the report says how the floor in rounds is taken" 0 "floor in rounds: the same floor from the host's copy and sgemm rates" -- \
  cat "$work/flush.md"
check "the Markdown report gives the floor in rounds where it was probed" 0 "\| % of floor in rounds \|" -- cat "$work/flush.md"
experiment "$work/flush-bad.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: lower}" \
  "backends: [cpu]" "repeat: {flush: -4}"
check "a negative flush is refused with its line" 1 "flush-bad.yaml:5: repeat.flush: must be between 0 and 16384 MiB, got -4" -- \
  "$lazylab" run "$work/flush-bad.yaml"

# show
check "show --code of a host backend says it generates none" 0 "// backend cpu generates no code" -- \
  "$lazylab" show softmax -p "decompose,fuse,lower" -b cpu --code
check "show --code needs a backend" 2 "--code needs --backend" -- "$lazylab" show softmax --code
check "show --code needs a lowered Program" 1 "--code: the pipeline must lower the graph" -- \
  "$lazylab" show softmax -p decompose -b cpu --code
printf 'graph @g {\n  %%0 = parameter {ordinal = 0} : f32[2]\n  %%1 = exp(%%9) : f32[2]\n  return %%1\n}\n' > "$work/bad.lzir"
check "malformed .lzir names line and column" 1 "bad.lzir:3:12: use of undefined value %9" -- "$lazylab" show "$work/bad.lzir"
check "missing .lzir file" 1 "nothing.lzir: cannot open a .lzir file" -- "$lazylab" show "$work/nothing.lzir"
mkdir -p "$work/folder.lzir"
check "a folder named .lzir" 1 "folder.lzir: is a folder, not a .lzir file" -- "$lazylab" show "$work/folder.lzir"
check "--print-after a pass not in the pipeline" 2 "--print-after dce: not a pass of the pipeline 'cse'" -- \
  "$lazylab" show chain-tiny --pipeline cse --print-after dce
check "a pass option given twice" 1 "pass 'fuse': option 'strategy' is given twice" -- \
  "$lazylab" show chain-tiny --pipeline 'fuse{strategy=none,strategy=dominator}'
check "an integer option below its minimum" 1 "option 'max-iterations' must be at least 1, got -1" -- \
  "$lazylab" show chain-tiny --pipeline 'canonicalize{max-iterations=-1}'
printf 'graph @g {\n  %%a = parameter {ordinal = 0} : f32[2]\n  %%b = parameter {ordinal = 0} : f32[2]\n  %%c = add(%%a, %%b) : f32[2]\n  return %%c\n}\n' > "$work/ordinals.lzir"
check "a repeated parameter ordinal names both lines" 1 "ordinals.lzir:3:[0-9]+: parameter ordinal 0 is also used on line 2" -- \
  "$lazylab" show "$work/ordinals.lzir"
printf 'graph @g {\n  %%a = parameter {ordinal = 1} : f32[2]\n  return %%a\n}\n' > "$work/gap.lzir"
check "a gap in parameter ordinals names the line" 1 "gap.lzir:2: parameter ordinal 1, but no parameter has ordinal 0" -- \
  "$lazylab" show "$work/gap.lzir"
check "unknown workload" 1 "unknown workload 'chian'" -- "$lazylab" show chian
check "show a workload after a pipeline" 0 "program \{  // 5 kernels" -- \
  "$lazylab" show chain-tiny --param iters=1 --pipeline 'canonicalize,cse,dce,lower'
check "show --dot" 0 "digraph G" -- "$lazylab" show softmax --param rows=2 --param cols=4 --pipeline decompose,fuse --dot
check "show --print-after-all" 0 "IR after cse //" -- "$lazylab" show experiments/workloads/axpy.lzir --pipeline cse,dce --print-after-all
check "show with an unknown pass" 1 "unknown pass 'csee'" -- "$lazylab" show chain-tiny --pipeline csee
# Resources are bounded before anything runs: a workload whose cells would
# hold more than limits.memory-bytes (inputs, outputs, the reference's
# outputs), or whose step traces past limits.trace-nodes, is refused with
# the figures; an arena that passes it fails its cell at compile.
experiment "$work/memory.yaml" "name: t" "workloads: [{name: layernorm, params: {rows: 1048576, cols: 16}}]" \
  "pipelines: {p: lower}" "backends: [interp]" "limits: {memory-bytes: 100000000}"
check "a workload over the memory limit is refused before it runs" 1 \
  "a cell would hold 256.0 MiB \(268435584 bytes\) at once, over the limit of 95.4 MiB \(100000000 bytes\) \(limits.memory-bytes\): inputs 64.0 MiB" -- \
  timeout 20 "$lazylab" run "$work/memory.yaml"
experiment "$work/arena.yaml" "name: t" "workloads: [{name: softmax, params: {rows: 1024, cols: 1024}}]" \
  "pipelines: {eager: 'decompose,fuse{strategy=none},lower'}" "backends: [cpu]" "limits: {memory-bytes: 20971520}" \
  "repeat: {warmup: 0, runs: 1}" "report: {json: $work/arena.json}"
check "an arena over the memory limit fails its cell with the figures" 4 \
  "FAILED: an execution would hold .* over the limit of 20.0 MiB .*arena 16.0 MiB" -- "$lazylab" run "$work/arena.yaml"
experiment "$work/long-trace.yaml" "name: t" "workloads: [{name: chain-tiny, params: {iters: 100000000}}]" \
  "pipelines: {p: lower}" "backends: [interp]" "limits: {trace-nodes: 100000}"
check "a trace past its limit is refused before it runs" 1 \
  "workload chain-tiny \(iters=100000000,n=64\): the trace reached 100000 nodes without a sync" -- \
  timeout 60 "$lazylab" run "$work/long-trace.yaml"

# One rule for an empty pipeline, on the command line as in an experiment.
check "show with an empty pipeline" 1 "pipeline '' names no pass" -- "$lazylab" show chain-tiny --pipeline ''
experiment "$work/empty-pipeline.yaml" "name: t" "workloads: [chain-tiny]" "pipelines: {p: ''}" "backends: [interp]"
check "an empty pipeline in an experiment" 1 "pipelines.p: pipeline '' names no pass" -- "$lazylab" run "$work/empty-pipeline.yaml"
check "show without a pipeline shows the graph" 0 "graph @chain-tiny" -- "$lazylab" show chain-tiny
check "show with a bad param" 1 "expected NAME=INTEGER" -- "$lazylab" show chain-tiny --param iters

# listings
check "passes lists every pass" 0 "strategy=\{dominator\|flash-attention\|gemm-epilogue\|greedy-elementwise\|horizontal\|none\|producer-consumer\} \(default none\)" -- "$lazylab" passes
check "passes gives each strategy's rules" 0 "^ +legal: TVM's rules \(matmul into" -- "$lazylab" passes
check "backends lists interp" 0 "interp +Reference interpreter" -- "$lazylab" backends
check "a broken plugin on the path is listed as unusable" 0 "wrongabi +UNUSABLE: .*ABI 1.0" -- \
  env LAZYLAB_PLUGIN_PATH="$test_build" "$lazylab" backends
# Each plugin is loaded in a child: one that segfaults while loading is named,
# and the others are still listed.
check "a plugin crashing on load is listed as crashed" 0 "crashload +UNUSABLE: crashed while loading \(signal 11" -- \
  env LAZYLAB_PLUGIN_PATH="$test_build" "$lazylab" backends
check "the others are listed beside a crashing plugin" 0 "^counting +reference kernels on private memory" -- \
  env LAZYLAB_PLUGIN_PATH="$test_build" "$lazylab" backends
check "backends gives each file and device" 0 "device: .*" -- "$lazylab" backends
check "backends lists each declared option with its default" 0 "options: +threads=0 +\(integer >= 0\) TBB and OpenBLAS threads" -- \
  "$lazylab" backends
check "and a choice's values" 0 "^ +row-groups=on +\(on\|off\)" -- "$lazylab" backends
check "workloads lists the suite" 0 "gpt2-block" -- "$lazylab" workloads

# ONNX models as workloads, and ONNX's node tests (libonnx-testdata, from .ci/setup).
onnx_data=/usr/share/libonnx-testdata/data
if [[ -d $onnx_data ]]; then
  experiment "$work/onnx.yaml" "name: onnx" \
    "workloads: [{onnx: $onnx_data/pytorch-converted/test_Linear/model.onnx, label: linear}, {onnx: $onnx_data/pytorch-operator/test_operator_basic/model.onnx}]" \
    "pipelines: {eager: 'decompose,lower', fused: 'decompose,canonicalize,cse,dce,fuse{strategy=dominator},lower,plan-memory'}" \
    "backends: [interp, cpu]" "repeat: {warmup: 0, runs: 2}" "report: {json: $work/onnx.json}"
  check "an ONNX model runs as a workload, weights bound from the model" 0 "ok" -- sh -c "'$lazylab' run '$work/onnx.yaml' -q >/dev/null && python3 -c \"
import json
r = json.load(open('$work/onnx.json'))
assert r['all_correct'] and len(r['cells']) == 8, r['cell_counts']
linear = [c for c in r['cells'] if c['workload_shown'] == 'linear']
assert all(c['flops'] == 2 * 4 * 10 * 8 for c in linear), [c['flops'] for c in linear]
print('ok')\""
  experiment "$work/onnx-dim.yaml" "name: t" "workloads: [{onnx: $onnx_data/pytorch-converted/test_Linear/model.onnx, params: {batch: 4}}]" \
    "pipelines: {p: 'decompose,lower'}" "backends: [interp]"
  check "an ONNX parameter that is no symbolic dimension" 1 "test_Linear/model.onnx: the model has no symbolic dimension 'batch' \\(it has: none\\)" -- \
    "$lazylab" run "$work/onnx-dim.yaml"
  experiment "$work/onnx-elu.yaml" "name: t" \
    "workloads: [{onnx: $onnx_data/pytorch-converted/test_ELU/model.onnx}, {onnx: $onnx_data/node/test_relu/model.onnx}]" \
    "pipelines: {p: 'decompose,lower'}" "backends: [interp]" "repeat: {warmup: 0, runs: 1}" "report: {json: $work/onnx-elu.json}"
  check "an ONNX op lazylab lacks fails that model's cells, naming the file, node, op and opset" 4 "test_ELU/model.onnx / p / interp: FAILED: .*test_ELU/model.onnx: node #0 \\(Elu, opset 13\\): lazylab does not implement this op" -- \
    "$lazylab" run "$work/onnx-elu.yaml"
  check "... and the run goes on: the other model's cells run, the report is written" 0 "ok" -- python3 -c "
import json
cells = json.load(open('$work/onnx-elu.json'))['cells']
assert [c['status'] for c in cells] == ['failed', 'ok'] and 'Elu' in cells[0]['error'], cells
print('ok')"
  experiment "$work/onnx-key.yaml" "name: t" "workloads: [{onnx: model.lzir}]" "pipelines: {p: lower}" "backends: [interp]"
  check "the onnx key wants an .onnx file" 1 "workloads\\[0\\].onnx: expected a path ending in .onnx" -- "$lazylab" run "$work/onnx-key.yaml"
  check "import writes a .lzir graph and .npy weights" 0 "wrote .*/imported/model.lzir \\(7 nodes, 1 inputs\\) and 2 weights" -- \
    "$lazylab" import "$onnx_data/pytorch-converted/test_Linear/model.onnx" -o "$work/imported"
  check "import says how long the import took" 0 "^imported in [0-9]+\\.[0-9]{3} s" -- \
    "$lazylab" import "$onnx_data/pytorch-converted/test_Linear/model.onnx" -o "$work/imported"
  experiment "$work/imported/run.yaml" "name: t" "workloads: [{file: model.lzir, weights: model.weights}]" \
    "pipelines: {p: 'decompose,lower'}" "backends: [interp, cpu]" "repeat: {warmup: 0, runs: 1}" "report: {json: $work/imported.json}"
  check "the imported graph runs with its weights bound" 0 "wrote" -- "$lazylab" run "$work/imported/run.yaml" -q
  check "import refuses a bad --param" 2 "--param 'batch': expected NAME=N with N > 0" -- \
    "$lazylab" import "$onnx_data/pytorch-converted/test_Linear/model.onnx" -o "$work/imported" --param batch
  experiment "$work/weights-name.yaml" "name: t" "workloads: [{name: softmax, weights: w}]" "pipelines: {p: lower}" "backends: [interp]"
  check "weights bind only .lzir files" 1 "workloads\\[0\\].weights: binds the parameters of a .lzir 'file' only" -- \
    "$lazylab" run "$work/weights-name.yaml"
  check "onnx-test lists each test with -v" 0 "passed +test_relu$" -- "$lazylab" onnx-test --filter 'test_relu' -v
  check "onnx-test names an unsupported op" 0 "unsupported test_softplus: .*node #0 \\(Softplus, opset 13\\): lazylab does not implement this op" -- \
    "$lazylab" onnx-test --filter 'test_softplus'
  check "onnx-test without tests says so" 1 "no node tests matching 'test_nothing' in" -- "$lazylab" onnx-test --filter 'test_nothing'
else
  echo "skip ONNX checks: no $onnx_data (bash .ci/setup installs libonnx-testdata)"
fi

# PyTorch training programs as workloads (`torch:`), with the torch_training
# peer, where Debian's torch and the Python package are built.
if [[ -f "$test_build/../python/lazylab/torch/loop.py" ]] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  experiment "$work/torch.yaml" "name: t" \
    "workloads: [{torch: $src/experiments/training/mlp_sgd.py, params: {batch: 8, hidden: 16}, label: mlp}, {torch: $src/experiments/training/mlp_sgd.py, params: {batch: 8, hidden: 16}, capture: fx, label: mlp-fx}]" \
    "pipelines: {p: 'canonicalize,cse,decompose,dce,fuse{strategy=producer-consumer},lower'}" "backends: [cpu]" \
    "repeat: {warmup: 1, runs: 2}" "reference: {backend: interp, pipeline: lower, rtol: 1.0e-4, atol: 1.0e-5}" \
    "peers: {eager: [/usr/bin/python3, $src/bench/peers/torch_training.py, --mode=eager], lazy: [/usr/bin/python3, $src/bench/peers/torch_training.py, --mode=lazylab]}" \
    "report: {json: $work/torch.json}"
  check "a torch: workload runs its captured training step, checked" 0 "mlp +p +cpu .* ok \\(" -- "$lazylab" run "$work/torch.yaml"
  check "the torch peers time the same program" 0 "ok" -- python3 -c "
import json
peers = {p['name']: p for p in json.load(open('$work/torch.json'))['peers']}
assert set(peers) == {'eager', 'lazy'}, peers.keys()
for p in peers.values():
    assert len(p['cells']) == 1 and p['cells'][0]['workload'].endswith('mlp_sgd.py'), p
print('ok')"
  # Both captures of one program, each checked against eager PyTorch's step
  # on the same inputs, with what it cost (the report's captures table).
  check "each capture is reported with its cost and its check against eager" 0 "ok" -- python3 -c "
import json
report = json.load(open('$work/torch.json'))
captures = {c['capture']: c for c in report['captures']}
assert set(captures) == {'lazy', 'fx'} and [c['workload_entry'] for c in report['captures']] == [0, 1], captures
assert captures['lazy']['capture_every_step'] and not captures['fx']['capture_every_step']
for c in captures.values():
    check = c['eager_check']
    assert 0 <= check['loss_relative_error'] <= check['loss_tolerance'] and check['state_scaled_error'] <= check['state_tolerance'], c
    assert c['aten_ops_per_step'] > 20 and c['capture_ms'] > 0 and c['host_ms_per_step'] > 0, c
assert [c['status'] for c in report['cells']] == ['ok', 'ok'], report['cells']
print('ok')"
  check "the captures table is in the report" 0 "mlp-fx +fx +1 +[0-9]+ +[0-9.]+ +once " -- "$lazylab" report "$work/torch.json" --format console
  check "reports with captures follow the JSON schema" 0 "valid: 1" -- "${schema_python:-python3}" -c "
import json, jsonschema, sys
validator = jsonschema.Draft202012Validator(json.load(open('experiments/report.schema.json')))
validator.validate(json.load(open('$work/torch.json')))
print('valid: 1')"
  experiment "$work/torch-capture.yaml" "name: t" "workloads: [{torch: $src/experiments/training/mlp_sgd.py, capture: dynamite}]" \
    "pipelines: {p: lower}" "backends: [interp]"
  check "an unknown capture is named with the known ones" 1 "unknown capture 'dynamite' \\(one of lazy, fx, dynamo\\)" -- \
    "$lazylab" run "$work/torch-capture.yaml"
  if /usr/bin/python3 -c "import torch, sys; sys.exit(hasattr(torch, 'compile'))"; then  # torch 1.x: no TorchDynamo
    experiment "$work/torch-dynamo.yaml" "name: t" "workloads: [{torch: $src/experiments/training/mlp_sgd.py, capture: dynamo}]" \
      "pipelines: {p: lower}" "backends: [interp]"
    check "the dynamo capture on torch 1.x says what it needs" 4 "FAILED: .*capture=dynamo.*needs torch 2.x's TorchDynamo" -- \
      "$lazylab" run "$work/torch-dynamo.yaml"
  fi
  # A program whose capture fails fails its own cells; the others run.
  sed 's/^def step(model, optimizer, schedule, x, y):$/&\n    raise RuntimeError("a step that fails on purpose")/' \
    "$src/experiments/training/mlp_sgd.py" > "$work/broken_step.py"
  experiment "$work/torch-broken.yaml" "name: t" \
    "workloads: [{torch: broken_step.py, label: broken}, {torch: $src/experiments/training/mlp_sgd.py, params: {batch: 8, hidden: 16}, label: mlp}]" \
    "pipelines: {p: lower}" "backends: [interp]" "repeat: {warmup: 0, runs: 1}"
  check "a program whose capture fails fails its cells, naming its line; the others run" 4 \
    "broken / p / interp: FAILED: .*broken_step.py:[0-9]+ in step: a step that fails on purpose" -- "$lazylab" run "$work/torch-broken.yaml"
  check "... the program that captures still runs and is checked" 4 "mlp / p / interp: .* ok" -- "$lazylab" run "$work/torch-broken.yaml"
  experiment "$work/torch-missing.yaml" "name: t" "workloads: [{torch: no_such_program.py}]" "pipelines: {p: lower}" "backends: [interp]"
  check "a torch: program that is not there stops the run" 1 "torch-missing.yaml:2: workloads\\[0\\]: .*no_such_program.py: no such program" -- \
    "$lazylab" run "$work/torch-missing.yaml"
  experiment "$work/capture-key.yaml" "name: t" "workloads: [{name: softmax, capture: fx}]" "pipelines: {p: lower}" "backends: [interp]"
  check "capture is a torch workload's key only" 1 "workloads\\[0\\].capture: says how a PyTorch program" -- \
    "$lazylab" run "$work/capture-key.yaml"
  experiment "$work/torch-param.yaml" "name: t" "workloads: [{torch: $src/experiments/training/mlp_sgd.py, params: {batches: 8}}]" \
    "pipelines: {p: lower}" "backends: [interp]"
  check "a torch: workload's unknown parameter is named" 1 "mlp_sgd.py: capturing its step .*unknown parameter 'batches' \\(the program has batch, classes, features, hidden\\)" -- \
    "$lazylab" run "$work/torch-param.yaml"
  experiment "$work/torch-key.yaml" "name: t" "workloads: [{torch: model.lzir}]" "pipelines: {p: lower}" "backends: [interp]"
  check "the torch key wants a .py program" 1 "workloads\\[0\\].torch: expected a path ending in .py" -- "$lazylab" run "$work/torch-key.yaml"
else
  echo "skip torch: workload checks: no Python package in $test_build/../python or no torch"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
