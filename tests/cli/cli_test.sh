#!/usr/bin/env bash
# The dtrain command line, end to end: cli_test.sh DTRAIN WORKDIR CASE.
# Cases: help, pipeline, resume, bad_input, demo. Prints "cli CASE passed" on success.
set -uo pipefail
D=$1; W=$2; CASE=$3
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# A small, fast model and run for the cases that only check plumbing.
TINY=(--data addition --digits 2 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1)

# Runs a command that must fail cleanly: exit status 2 (not a crash: >= 128 is a signal)
# and an error line on stderr that contains every given word.
expect_error() {
  local words=$1; shift
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ $rc -eq 2 ] || { cat out.txt err.txt; fail "expected exit 2, got $rc: $*"; }
  for w in $words; do grep -q -- "$w" err.txt || { cat err.txt; fail "error lacks \"$w\": $*"; }; done
}

case $CASE in
help)
  $D --help | grep -q "train" || fail "top-level help lists no train command"
  $D train --help | grep -q -- "--resume" || fail "train --help lacks --resume"
  $D generate --help | grep -q -- "--top-p" || fail "generate --help lacks --top-p"
  $D eval --help | grep -q -- "--checkpoint" || fail "eval --help lacks --checkpoint"
  $D --version | grep -q "0\." || fail "--version"
  ;;
pipeline)
  $D train "${TINY[@]}" --steps 30 --eval-problems 10 --json s.json --out run >log.txt 2>&1 || { cat log.txt; fail train; }
  for f in run/metrics.jsonl run/loss.svg run/ckpt.index.json s.json; do [ -s $f ] || fail "missing $f"; done
  [ "$(wc -l <run/metrics.jsonl)" -eq 30 ] || fail "metrics.jsonl should have 30 lines"
  grep -q '"loss"' run/metrics.jsonl || fail "metrics lack loss"
  grep -q "<svg" run/loss.svg && grep -q "<polyline" run/loss.svg || fail "loss.svg has no curve"
  grep -q "exact match" log.txt || fail "train printed no exact match"
  $D generate --checkpoint run/ckpt --prompt "12+34=" --max-new-tokens 4 --json g.json >gen.txt 2>/dev/null || fail generate
  head -c 6 gen.txt | grep -q "12+34=" || fail "generate did not echo the prompt"
  grep -q '"tokens_per_s"' g.json || fail "generate JSON lacks tokens_per_s"
  # Sampling with a seed is repeatable.
  a=$($D generate --checkpoint run/ckpt --prompt "1" --max-new-tokens 6 --temperature 1 --top-k 8 --seed 5 2>/dev/null)
  b=$($D generate --checkpoint run/ckpt --prompt "1" --max-new-tokens 6 --temperature 1 --top-k 8 --seed 5 2>/dev/null)
  [ "$a" == "$b" ] || fail "seeded sampling differs: '$a' vs '$b'"
  $D eval --checkpoint run/ckpt --digits 2 --problems 20 --json e.json >/dev/null 2>&1 || fail eval
  grep -q '"accuracy"' e.json || fail "eval JSON lacks accuracy"
  # Mixed precision: a bf16 run, and its checkpoint records the precision for generate.
  $D train "${TINY[@]}" --steps 5 --eval-problems 4 --precision bf16 --out bf >/dev/null 2>&1 || fail "bf16 train"
  grep -q '"precision": *"bf16"' bf/ckpt.index.json || fail "checkpoint lacks precision bf16"
  $D generate --checkpoint bf/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "bf16 generate"
  $D train "${TINY[@]}" --steps 5 --eval-problems 0 --precision f16 --out f16 --json f16.json >/dev/null 2>&1 || fail "f16 train"
  grep -q '"loss_scale"' f16/metrics.jsonl || fail "f16 metrics lack loss_scale"
  printf 'hello world, this is a small text file for the text dataset. %.0s' {1..20} >t.txt
  $D train --data text:t.txt --context 16 --layers 1 --d-model 32 --heads 2 --batch 4 --steps 5 --no-progress \
    --out trun >/dev/null 2>&1 || fail "train on text"
  $D eval --checkpoint trun/ckpt --data text:t.txt --batches 2 --batch 4 >ev.txt 2>&1 || { cat ev.txt; fail "eval on text"; }
  grep -q perplexity ev.txt || fail "text eval prints no perplexity"
  ;;
resume)
  # 20 steps straight == 10 steps, stop, resume to 20: every metrics line and the weights.
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out a --json a.json >/dev/null 2>&1 || fail "straight run"
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out b --stop-at 10 >/dev/null 2>&1 || fail "first half"
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out b --resume --json b.json >/dev/null 2>&1 || fail "resumed half"
  diff <(cut -d, -f1,2 a/metrics.jsonl) <(cut -d, -f1,2 b/metrics.jsonl) || fail "grad norms or losses differ after resume"
  [ "$(grep final_loss a.json)" == "$(grep final_loss b.json)" ] || fail "final loss differs after resume"
  cmp a/ckpt.*.safetensors b/ckpt.*.safetensors || fail "checkpoints differ after resume"
  ;;
bad_input)
  expect_error "vocab_size" $D train "${TINY[@]}" --steps 1 --vocab 40 --out v   # '=' is byte 61
  expect_error "no-such-file.txt" $D train --data text:no-such-file.txt --steps 1 --no-progress --out m
  : >empty.txt
  expect_error "empty.txt context" $D train --data text:empty.txt --context 8 --steps 1 --no-progress --out e
  expect_error "micro_batches" $D train "${TINY[@]}" --steps 1 --batch 10 --micro-batches 3 --out mb
  expect_error "batch" $D train "${TINY[@]}" --steps 1 --batch 0 --out b0
  expect_error "n_head" $D train "${TINY[@]}" --steps 1 --heads 3 --out h3
  expect_error "precision" $D train "${TINY[@]}" --steps 1 --precision f8 --out p
  expect_error "device gpu0" $D train "${TINY[@]}" --steps 1 --device gpu0 --out dv
  # A GPU this machine or build lacks: a clear refusal, not a crash.
  expect_error "cuda:999 available" $D train "${TINY[@]}" --steps 1 --device cuda:999 --out dv
  expect_error "schedule" $D train "${TINY[@]}" --steps 1 --schedule linear --out s
  expect_error "data" $D train --data csv:x --steps 1 --out d
  expect_error "--steps" $D train --steps abc
  expect_error "--bogus" $D train --bogus
  expect_error "index.json" $D generate --checkpoint nowhere/ckpt --prompt hi
  # A checkpoint cut short, or with a header that lies, is refused, and nothing is half-loaded.
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out ok >/dev/null 2>&1 || fail "train for the corruption cases"
  cp -r ok cut && f=$(ls cut/ckpt.*.safetensors) && truncate -s 100 "$f"
  expect_error "DT_ERR_IO" $D generate --checkpoint cut/ckpt --prompt "1+"
  cp -r ok hdr && f=$(ls hdr/ckpt.*.safetensors) && printf '\xff\xff\xff\xff\xff\xff\xff\x7f' | dd of="$f" conv=notrunc 2>/dev/null
  expect_error "DT_ERR_IO" $D generate --checkpoint hdr/ckpt --prompt "1+"
  expect_error "prompt" $D generate --checkpoint ok/ckpt --prompt ""
  expect_error "context" $D generate --checkpoint ok/ckpt --prompt "12+34=12+34=12+34=12+34=12+34="
  expect_error "max_new_tokens" $D generate --checkpoint ok/ckpt --prompt "12+34=" --max-new-tokens 50
  ;;
demo)
  # The README's main job, at its full size: at least 90% exact match on held-out 3-digit sums.
  $D train --data addition --digits 3 --layers 2 --d-model 128 --heads 4 --steps 2000 --batch 64 --lr 3e-3 \
    --no-progress --json demo.json >log.txt 2>&1 || { cat log.txt; fail demo; }
  cat log.txt
  python3 - <<'PY' || fail "accuracy below 90%"
import json, sys
acc = json.load(open("demo.json"))["exact_match"]["accuracy"]
print("demo accuracy", acc)
sys.exit(0 if acc >= 0.90 else 1)
PY
  ;;
plan)
  # The ZeRO paper's Table 1 (7.5B parameters, N = 64, mixed-precision Adam, K = 12).
  $D plan --params 7.5e9 --dp 64 --json plan.json >plan.txt || fail "plan"
  cat plan.txt
  for want in "120.0 GB" "31.4 GB" "16.6 GB" "1.9 GB"; do grep -q "$want" plan.txt || fail "plan lacks $want"; done
  $D plan --params 1e9 --dp 4 --micro-batch 2 --accumulation 8 | grep -q "2 x 4 x 8 = 64" || fail "effective batch"
  grep -q '"total_bytes": 120000000000' plan.json || fail "plan JSON lacks the baseline total"
  $D plan --model gpt-tiny --dp 2 --zero 3 | grep -q "ZeRO-3" || fail "plan of a model"
  expect_error "--zero" $D plan --params 1e9 --zero 4
  ;;
dp)
  # DDP over 2 and 4 ranks of one process: the same losses as one rank, to rounding.
  $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out d1 --json d1.json >/dev/null 2>&1 || fail "dp 1"
  $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out d2 --json d2.json --dp 2 >/dev/null 2>&1 || fail "dp 2"
  $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out d4 --json d4.json --dp 4 --micro-batches 2 >/dev/null 2>&1 || fail "dp 4"
  python3 - <<'PY' || fail "dp losses differ from one rank"
import json
a, b, c = (json.load(open(f))["final_loss"] for f in ("d1.json", "d2.json", "d4.json"))
print("final loss dp1 %.9f dp2 %.9f dp4 %.9f" % (a, b, c))
assert abs(a - b) <= 1e-5 * abs(a) and abs(a - c) <= 1e-5 * abs(a)
PY
  # --report: the ledgers next to the formulas (DDP replicates: measured param bytes = 4 x params).
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out dr --dp 2 --report --json dr.json >rep.txt 2>&1 || fail "report"
  grep -q "report: memory per rank" rep.txt && grep -q "traffic on dp per train step" rep.txt || { cat rep.txt; fail "report text"; }
  python3 - <<'PY' || fail "report: measured param/grad bytes differ from the formula"
import json
s = json.load(open("dr.json"))
p = s["params"]
for row in s["report"]["per_rank"]:
    assert row["param"]["current"] == 4 * p and row["grad"]["current"] == 4 * p, (row, p)
    assert row["optimizer"]["current"] == 8 * p + 8, (row["optimizer"], p)
PY
  # --trace: a Chrome trace with both ranks' compute and comm tracks.
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out dt --dp 2 --trace dt/trace.json >/dev/null 2>&1 || fail "trace"
  python3 - <<'PY' || fail "trace JSON"
import json
t = json.load(open("dt/trace.json"))["traceEvents"]
tracks = {e["args"]["name"] for e in t if e["ph"] == "M"}
assert {"rank 0 compute", "rank 0 comm", "rank 1 compute", "rank 1 comm"} <= tracks, tracks
assert any(e["name"].startswith("all_reduce bucket") for e in t)
PY
  expect_error "dp (3)" $D train "${TINY[@]}" --steps 1 --dp 3 --out d3
  $D generate --checkpoint d2/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from a dp run"
  ;;
zero)
  # ZeRO-1/2/3 over 2 ranks: the losses of one rank, to rounding; then the ledgers and the trace.
  $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out z0 --json z0.json >/dev/null 2>&1 || fail "zero: one rank"
  for z in 1 2 3; do
    $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out z$z --json z$z.json --dp 2 --zero $z >/dev/null 2>&1 || fail "zero $z"
  done
  python3 - <<'PY' || fail "zero losses differ from one rank"
import json
a = [json.load(open("z%d.json" % z))["final_loss"] for z in range(4)]
print("final loss one rank %.9f, zero-1 %.9f, zero-2 %.9f, zero-3 %.9f" % tuple(a))
assert all(abs(x - a[0]) <= 1e-5 * abs(a[0]) for x in a), a
PY
  # --report at stage 3: every rank holds half of each model state (no padding here), and
  # the wire bytes per step come to the formula's 3 psi x (N-1)/N x 4 bytes.
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out zr --dp 2 --zero 3 --report --json zr.json >rep.txt 2>&1 || { cat rep.txt; fail "zero report"; }
  python3 - <<'PY' || { cat rep.txt; fail "zero report: measured bytes differ from the formulas"; }
import json
s = json.load(open("zr.json"))
p, r = s["params"], s["report"]
for row in r["per_rank"]:
    assert row["param"]["current"] == 4 * p // 2 == row["param"]["formula"], row
    assert row["grad"]["current"] == 4 * p // 2, row
    assert row["optimizer"]["current"] - 8 * p // 2 in (8, 16), row  # step counters
ratio = r["wire_bytes_per_step"] / r["wire_bytes_formula"]
print("zero-3 wire bytes per step / formula = %.3f" % ratio)
assert 0.99 < ratio < 1.01, ratio
PY
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out zt --dp 2 --zero 3 --trace zt/trace.json >/dev/null 2>&1 || fail "zero trace"
  python3 - <<'PY' || fail "zero trace JSON"
import json
t = json.load(open("zt/trace.json"))["traceEvents"]
names = [e["name"] for e in t if e["ph"] == "X"]
for want in ("all_gather block.0", "reduce_scatter block.0", "forward block 0", "backward block 0"):
    assert any(n.startswith(want) for n in names), want
PY
  $D generate --checkpoint z3/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from a zero-3 run"
  expect_error "--zero" $D train "${TINY[@]}" --steps 1 --dp 2 --zero 4 --out z4
  expect_error "--zero --dp" $D train "${TINY[@]}" --steps 1 --zero 2 --out z5
  ;;
mpi)
  # dtrain train under mpirun (MPIEXEC from ctest): one rank per process, DDP and ZeRO-3,
  # the losses of one rank to rounding; rank 0 alone writes the run's files.
  $D train "${TINY[@]}" --steps 10 --eval-problems 0 --out m1 --json m1.json >/dev/null 2>&1 || fail "mpi: one rank"
  for z in 0 3; do
    "$MPIEXEC" -np 2 --oversubscribe $D train "${TINY[@]}" --backend mpi --zero $z --steps 10 --eval-problems 0 \
      --out mz$z --json mz$z.json >mpi$z.txt 2>&1 || { cat mpi$z.txt; fail "mpirun zero $z"; }
    [ "$(grep -c '^trained 10 steps' mpi$z.txt)" = 1 ] || { cat mpi$z.txt; fail "mpirun zero $z: not exactly one rank printed"; }
  done
  python3 - <<'PY' || fail "mpirun losses differ from one rank"
import json
a = [json.load(open(f))["final_loss"] for f in ("m1.json", "mz0.json", "mz3.json")]
print("final loss one rank %.9f, mpirun DDP %.9f, mpirun ZeRO-3 %.9f" % tuple(a))
assert all(abs(x - a[0]) <= 1e-5 * abs(a[0]) for x in a), a
PY
  $D generate --checkpoint mz3/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from an mpirun ZeRO-3 run"
  expect_error "--backend tcp local mpi" $D train "${TINY[@]}" --steps 1 --backend tcp --out mt
  expect_error "--dp --backend" "$MPIEXEC" -np 2 --oversubscribe $D train "${TINY[@]}" --steps 1 --backend mpi --dp 2 --out mt
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "cli $CASE passed"
