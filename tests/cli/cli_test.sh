#!/usr/bin/env bash
# The dtrain command line, end to end: cli_test.sh DTRAIN WORKDIR CASE.
# Cases: help, pipeline, resume, interrupt, data_shrinks, bad_input, ranges, plan, dp, zero, tp, pp, serve, serve_chat, mpi, demo, hf. Prints
# "cli CASE passed" on success.
set -uo pipefail
# (No `producer | grep -q`: grep -q exits at its first match, the producer may then die of
# SIGPIPE, and pipefail turns that into a failure that depends on timing.)
D=$1; W=$2; CASE=$3
DOCS="$(cd "$(dirname "$0")/../../docs" && pwd)"
HF="$(cd "$(dirname "$0")/../fixtures/hf/models" && pwd)"  # tiny Hugging Face models (tools/hf_fixtures)
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

# A usage error: exit 2 and exactly one line on stderr, which contains the given text.
expect_usage() {
  local want=$1; shift
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ $rc -eq 2 ] || { cat out.txt err.txt; fail "expected exit 2, got $rc: $*"; }
  [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt; fail "expected one line on stderr: $*"; }
  grep -qF -- "$want" err.txt || { cat err.txt; fail "error lacks \"$want\": $*"; }
}

# --report's ledgers against the library's plan (dtrain train --json FILE): every rank's
# param and grad bytes equal to the formula, and the gradient traffic on each group within
# 1% of its formula (a few bytes of loss and norm sums ride the same groups). AXES: the
# groups the layout's gradients must cross, space-separated.
expect_ledgers() {
  python3 - "$1" "$2" <<'PY' || fail "report ledgers of $1 differ from the plan's formulas"
import json, sys
r = json.load(open(sys.argv[1]))["report"]
for row in r["per_rank"]:
    for tag in ("param", "grad"):
        assert row[tag]["current"] == row[tag]["formula"], (tag, row)
by_axis = r["wire_bytes_by_axis"]
assert sorted(by_axis) == sorted(sys.argv[2].split()), by_axis
for axis, v in by_axis.items():
    print("%s: gradient wire bytes per step on %s %.0f, formula %.0f" % (sys.argv[1], axis, v["measured"], v["formula"]))
    assert v["formula"] > 0 and abs(v["measured"] / v["formula"] - 1) < 0.01, (axis, v)
PY
}

case $CASE in
serve_chat)
  # dtrain serve --model over loopback (tests/cli/serve_chat_test.py): OpenAI chat completions
  # through the fixtures' tokenizers and chat templates, on one rank, --tp 2, --pp 2, 2 replicas.
  for flags in "" "--tp 2" "--pp 2" "--replicas 2"; do
    timeout 300 python3 "$(dirname "$DOCS")/tests/cli/serve_chat_test.py" $D "$(dirname "$DOCS")/tests/fixtures/hf" \
      "w$(echo $flags | tr -d ' -')" $flags || fail "serve chat $flags"
  done
  ;;
hf)
  # A Hugging Face directory: inspected, generated from (a prompt and a chat), fine-tuned on
  # conversations under tp 2 and pp 2 (the same losses as one rank), exported, and the
  # export generates what the run's checkpoint generates.
  $D inspect "$HF/qwen2" --json i.json >ins.txt || fail inspect
  grep -q "Qwen2ForCausalLM" ins.txt && grep -q "tp 2 pp 2" ins.txt || { cat ins.txt; fail "inspect output"; }
  grep -q '"layouts"' i.json || fail "inspect JSON lacks layouts"
  $D generate --model "$HF/llama3" --prompt "Hello" --max-new-tokens 6 --ignore-eos --json g.json >/dev/null 2>&1 || fail "generate --model"
  grep -q '"tokens"' g.json || fail "generate --model JSON lacks tokens"
  $D generate --model "$HF/qwen2" --chat '[{"role":"user","content":"Hi"}]' --max-new-tokens 4 >chat.txt 2>/dev/null || fail "generate --chat"
  grep -q "<|im_start|>assistant" chat.txt || { cat chat.txt; fail "the chat template was not applied"; }
  expect_error "alternate" $D generate --model "$HF/llama" --chat '[{"role":"user","content":"a"},{"role":"user","content":"b"}]'
  expect_error "not_there directory" $D inspect not_there
  expect_usage "hf:DIR" $D train --init "$HF/qwen2" --data text:x
  for i in $(seq 1 40); do
    echo '{"messages": [{"role": "user", "content": "what is '$i' plus one?"}, {"role": "assistant", "content": "it is '$((i + 1))'"}]}'
  done >chats.jsonl
  HFT=(--init "hf:$HF/qwen2" --data jsonl:chats.jsonl --context 96 --steps 6 --batch 4 --micro-batches 2 --lr 1e-2 --no-progress --threads 1)
  $D train "${HFT[@]}" --out one >one.txt 2>&1 || { cat one.txt; fail "train --init hf"; }
  $D train "${HFT[@]}" --tp 2 --out tp >/dev/null 2>&1 || fail "train --init hf --tp 2"
  $D train "${HFT[@]}" --pp 2 --out pp >/dev/null 2>&1 || fail "train --init hf --pp 2"
  loss() { grep -o '"loss":[0-9.e+-]*' "$1"/metrics.jsonl | tail -1 | cut -d: -f2; }
  for r in tp pp; do
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-4 * abs(b))" \
      "$(loss $r)" "$(loss one)" || fail "$r final loss $(loss $r) differs from one rank's $(loss one)"
  done
  $D export --checkpoint tp/ckpt --hf out --precision f32 >/dev/null || fail export
  for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -s out/$f ] || fail "export lacks $f"
  done
  a=$($D generate --model out --prompt "what is" --max-new-tokens 5 --ignore-eos 2>/dev/null)
  b=$($D generate --model "$HF/qwen2" --prompt "what is" --max-new-tokens 5 --ignore-eos 2>/dev/null)
  [ "$a" != "$b" ] || fail "the export generates what the untrained model does: not the trained weights?"
  $D export --model out --hf out_bf16 --precision bf16 --max-shard-mb 1 >/dev/null || fail "export --model"
  $D inspect out_bf16 | grep -q "stored as bf16" || fail "the rewritten export is not bf16"
  # Qwen2-MoE (a gated shared expert beside the routed ones): fine-tuned with the experts over
  # ep 2 against one rank running the same rows as 2 micro-batches, then exported as Qwen2-MoE.
  $D inspect "$HF/qwen2_moe" | grep -q "a shared expert of width 96 (gated)" || fail "inspect qwen2_moe"
  QM=(--init "hf:$HF/qwen2_moe" --data jsonl:chats.jsonl --context 96 --steps 6 --batch 4 --lr 1e-2 --no-progress --threads 1)
  $D train "${QM[@]}" --micro-batches 2 --out qm1 >/dev/null 2>&1 || fail "train --init hf qwen2_moe"
  $D train "${QM[@]}" --ep 2 --out qm2 >/dev/null 2>&1 || fail "train --init hf qwen2_moe --ep 2"
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * abs(b))" \
    "$(loss qm2)" "$(loss qm1)" || fail "qwen2_moe ep 2 final loss $(loss qm2) differs from one rank's $(loss qm1)"
  $D export --checkpoint qm2/ckpt --hf qmout --precision f32 >/dev/null || fail "export qwen2_moe"
  grep -q '"Qwen2MoeForCausalLM"' qmout/config.json && grep -q '"shared_expert_intermediate_size": 96' qmout/config.json ||
    { cat qmout/config.json; fail "the qwen2_moe export's config"; }
  $D generate --model qmout --prompt "what is" --max-new-tokens 3 --ignore-eos >/dev/null 2>&1 || fail "generate the qwen2_moe export"
  ;;
help)
  $D --help | grep >/dev/null "train" || fail "top-level help lists no train command"
  $D train --help | grep >/dev/null -- "--resume" || fail "train --help lacks --resume"
  $D generate --help | grep >/dev/null -- "--top-p" || fail "generate --help lacks --top-p"
  $D eval --help | grep >/dev/null -- "--checkpoint" || fail "eval --help lacks --checkpoint"
  $D --version | grep >/dev/null "0\." || fail "--version"
  ;;
pipeline)
  $D train "${TINY[@]}" --steps 30 --eval-problems 10 --json s.json --out run >log.txt 2>&1 || { cat log.txt; fail train; }
  for f in run/metrics.jsonl run/loss.svg run/ckpt.index.json s.json; do [ -s $f ] || fail "missing $f"; done
  [ "$(wc -l <run/metrics.jsonl)" -eq 30 ] || fail "metrics.jsonl should have 30 lines"
  grep -q '"loss"' run/metrics.jsonl || fail "metrics lack loss"
  grep -q "<svg" run/loss.svg && grep -q "<polyline" run/loss.svg || fail "loss.svg has no curve"
  grep -q "exact match" log.txt || fail "train printed no exact match"
  $D generate --checkpoint run/ckpt --prompt "12+34=" --max-new-tokens 4 --json g.json >gen.txt 2>/dev/null || fail generate
  head -c 6 gen.txt | grep >/dev/null "12+34=" || fail "generate did not echo the prompt"
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
  # eval reports the batches it ran: --batches 0 is one pass (bytes - 1) / context examples
  # in batches of 4; asking for more than there are runs (and says) only those.
  all=$(( ($(stat -c %s t.txt) - 1) / 16 / 4 ))
  for n in 0 100000; do
    $D eval --checkpoint trun/ckpt --data text:t.txt --batches $n --batch 4 --json ev$n.json >ev.txt 2>&1 || { cat ev.txt; fail "eval --batches $n"; }
    grep -q "($all batches of 4)" ev.txt || { cat ev.txt; fail "eval --batches $n should run and print $all batches"; }
    grep -q "\"batches\": $all" ev$n.json || fail "eval JSON lacks batches $all"
  done
  $D eval --checkpoint trun/ckpt --data text:t.txt --batches 2 --batch 4 | grep >/dev/null "(2 batches of 4)" || fail "eval --batches 2"
  ;;
resume)
  # 20 steps straight == 10 steps, stop, resume to 20: every metrics line and the weights.
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out a --json a.json >/dev/null 2>&1 || fail "straight run"
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out b --stop-at 10 >/dev/null 2>&1 || fail "first half"
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out b --resume --json b.json >/dev/null 2>&1 || fail "resumed half"
  diff <(cut -d, -f1,2 a/metrics.jsonl) <(cut -d, -f1,2 b/metrics.jsonl) || fail "grad norms or losses differ after resume"
  [ "$(grep final_loss a.json)" == "$(grep final_loss b.json)" ] || fail "final loss differs after resume"
  cmp a/ckpt.*.safetensors b/ckpt.*.safetensors || fail "checkpoints differ after resume"
  # --async-save on dp 2 ZeRO-2 (sharded): saves written while training goes on; the run stopped
  # at 10 (its last save waits) and resumed ends as the straight run, file for file.
  Z=(--steps 20 --eval-problems 0 --dp 2 --zero 2 --save-every 3)
  $D train "${TINY[@]}" "${Z[@]}" --out za --json za.json >/dev/null 2>&1 || fail "zero straight run"
  $D train "${TINY[@]}" "${Z[@]}" --async-save --out zb --stop-at 10 --report >zb.txt 2>&1 || { cat zb.txt; fail "async first half"; }
  grep -q "asynchronous saves: 3" zb.txt || { cat zb.txt; fail "the --report of asynchronous saves"; }
  $D train "${TINY[@]}" "${Z[@]}" --async-save --out zb --resume --json zb.json >/dev/null 2>&1 || fail "async resumed half"
  [ "$(grep final_loss za.json)" == "$(grep final_loss zb.json)" ] || fail "final loss differs after an async resume"
  for r in 0 1; do cmp za/ckpt.*.r$r.safetensors zb/ckpt.*.r$r.safetensors || fail "rank $r's file differs after an async resume"; done
  ;;
interrupt)
  # Ctrl-C mid-run: the running step is cancelled through dt_cancel (no update), the last
  # completed step is saved, exit 130; the run holds exactly what an uninterrupted run to
  # that step holds (metrics and checkpoint), so --resume goes on from it.
  $D train "${TINY[@]}" --steps 100000 --eval-problems 0 --out i >run.txt 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [ "$(wc -l <i/metrics.jsonl 2>/dev/null || echo 0)" -ge 5 ] && break
    sleep 0.1
  done
  kill -INT $pid
  rc=0; wait $pid || rc=$?
  [ $rc -eq 130 ] || { cat run.txt; fail "exit $rc after SIGINT; wanted 130"; }
  grep -q "interrupted during step .* changed nothing; saved step" run.txt || { cat run.txt; fail "no interrupt line"; }
  n=$(wc -l <i/metrics.jsonl)
  $D train "${TINY[@]}" --steps 100000 --stop-at "$n" --eval-problems 0 --out s >/dev/null 2>&1 || fail "straight run"
  diff <(cut -d, -f1,2 s/metrics.jsonl) <(cut -d, -f1,2 i/metrics.jsonl) || fail "metrics differ from a straight run"
  cmp s/ckpt.*.safetensors i/ckpt.*.safetensors || fail "checkpoint differs from a straight run's"
  $D train "${TINY[@]}" --steps 100000 --stop-at $((n + 2)) --eval-problems 0 --out i --resume >/dev/null 2>&1 ||
    fail "resume after the interrupt"
  [ "$(wc -l <i/metrics.jsonl)" -eq $((n + 2)) ] || fail "resume did not go on from step $n"
  ;;
data_shrinks)
  # The token file shrinks under a running train (issue 31: a mapping made that SIGBUS, exit
  # 135 with no message and nothing saved): one line naming the file, exit 2, and the last
  # completed step saved and resumable.
  python3 -c "import random, struct, sys; random.seed(1); sys.stdout.buffer.write(struct.pack('<200000H', *[random.randrange(32) for _ in range(200000)]))" >tok.bin
  SHR=(--data tokens:tok.bin:2 --context 16 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1 --eval-problems 0)
  $D train "${SHR[@]}" --steps 100000 --out s >run.txt 2>err.txt &
  pid=$!
  for _ in $(seq 300); do
    [ "$(wc -l <s/metrics.jsonl 2>/dev/null || echo 0)" -ge 3 ] && break
    sleep 0.1
  done
  truncate -s 64 tok.bin
  rc=0; wait $pid || rc=$?
  [ $rc -eq 2 ] || { cat run.txt err.txt; fail "exit $rc after the data shrank; wanted 2"; }
  [ "$(grep -c . err.txt)" -eq 1 ] || { cat err.txt; fail "wanted one error line"; }
  grep -q "tok.bin.*truncated while in use.*saved step [0-9]* to s/ckpt.index.json" err.txt || { cat err.txt; fail "error line"; }
  n=$(wc -l <s/metrics.jsonl)
  [ -s s/ckpt.index.json ] || fail "no checkpoint after the data shrank"
  grep -q "saved step $n " err.txt || { cat err.txt; fail "saved step is not the last metrics line ($n)"; }
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
  # Issue 31: nothing accepted only to be ignored or to fail late.
  expect_usage "--json nowhere/g.json: cannot write it" $D generate --checkpoint ok/ckpt --prompt "1+" --json nowhere/g.json
  [ ! -s out.txt ] || { cat out.txt; fail "generate ran before refusing an unwritable --json"; }
  # A byte-level model's text need not be UTF-8 (temperature 100: near-uniform bytes): the
  # JSON is written with U+FFFD for the bad bytes, not lost to an exception at the end.
  $D generate --checkpoint ok/ckpt --prompt "1+" --max-new-tokens 6 --temperature 100 --seed 3 --json u.json \
    >/dev/null 2>u.err || { cat u.err; fail "generate --json of text that is not UTF-8"; }
  python3 -c "import json, sys; t = json.load(open('u.json'))['text']; sys.exit(0 if '\ufffd' in t else 1)" ||
    { cat u.json; fail "the generated text held no byte that is not UTF-8: pick another --seed"; }
  expect_usage "--resume: no checkpoint to resume in --out fresh" $D train "${TINY[@]}" --steps 1 --out fresh --resume
  [ ! -e fresh ] || fail "--resume without a checkpoint created the run directory"
  for bad in "" "2," "1,,1" ",1" "0,2" "x"; do
    expect_usage "--pp-blocks \"$bad\": accepted: comma-separated block counts" $D plan --model gpt-tiny --pp 2 --pp-blocks "$bad"
  done
  expect_usage "--pp-blocks 1,1 places a model's blocks" $D plan --pp 2 --pp-blocks 1,1
  expect_usage '--pp-schedule "": accepted: gpipe, 1f1b' $D plan --pp 2 --pp-schedule ""
  expect_usage '--pp-schedule "": accepted' $D train "${TINY[@]}" --steps 1 --pp 2 --pp-schedule "" --out ps
  # 1024 rank threads under a 3 GB address-space limit: out of resources, named, not
  # DT_ERR_INTERNAL. (A sanitizer's shadow memory does not fit such a limit: skipped there.)
  if ! grep -qa -e __asan_init -e __tsan_init "$D"; then
    (ulimit -v 3000000; expect_error "DT_ERR_OUT_OF_MEMORY thread lower" $D train "${TINY[@]}" --batch 1024 --dp 1024 \
      --steps 1 --eval-problems 0 --out big) || exit 1
  fi
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
ranges)
  # Every numeric flag refuses a value outside its range while parsing, before any work:
  # exit 2 and one line naming the command, the flag, the value and the accepted range.
  R=(--steps 1 --no-progress --out r)
  expect_usage "dtrain train: --layers -1: accepted 1 to 1024" $D train --layers -1 "${R[@]}"
  expect_usage "dtrain train: --layers 0: accepted 1 to 1024" $D train --layers 0 "${R[@]}"
  expect_usage "--d-model -64: accepted 1 to 65536" $D train --d-model -64 "${R[@]}"
  expect_usage "--heads -2: accepted 1 to 1024" $D train --heads -2 "${R[@]}"
  expect_usage "--d-ff -1: accepted 0 (4 x --d-model) or 1 to 262144" $D train --d-ff -1 "${R[@]}"
  expect_usage "--dp 0: accepted 1 to 1024" $D train --dp 0 "${R[@]}"
  expect_usage "--threads -1: accepted 0 (all cores) or 1 to 1024" $D train --threads -1 "${R[@]}"
  expect_usage "--warmup -1: accepted 0 to 1000000000" $D train --warmup -1 "${R[@]}"
  expect_usage "--save-every -5: accepted 0 (only at the end) or 1 to 1000000000" $D train --save-every -5 "${R[@]}"
  expect_usage "--stop-at -1: accepted 0 (run to --steps) or 1 to 1000000000" $D train --stop-at -1 "${R[@]}"
  expect_usage "--steps 99999999999999999999: accepted 1 to 1000000000" $D train --steps 99999999999999999999
  expect_usage "--steps 0: accepted 1 to 1000000000" $D train --steps 0
  expect_usage "--steps 10x: not an integer" $D train --steps 10x
  expect_usage "--batch 1.5: not an integer" $D train --batch 1.5
  expect_usage "--lr nan: not a finite number" $D train --lr nan "${R[@]}"
  expect_usage "--lr inf: accepted 0 to 10" $D train --lr inf "${R[@]}"
  expect_usage "--lr 1e400: accepted 0 to 10" $D train --lr 1e400 "${R[@]}"
  expect_usage "--beta2 1: accepted 0 to 0.999999" $D train --beta2 1 "${R[@]}"
  expect_usage "--clip -1: accepted 0 (no clipping) to 1000000" $D train --clip -1 "${R[@]}"
  expect_usage "--train-size 4611686018427387904: accepted 1 to 1000000000" $D train --train-size 4611686018427387904 "${R[@]}"
  expect_usage "--timeout 0: accepted 1 to 86400" $D train --timeout 0 "${R[@]}"
  expect_usage "dtrain eval: --problems 1099511627776: accepted 1 to 10000000" $D eval --problems 1099511627776
  expect_usage "dtrain eval: --batches -1: accepted 0 (all: one pass over the data) or 1 to 1000000000" $D eval --batches -1
  expect_usage "dtrain generate: --top-p 0: accepted 1e-06 to 1" $D generate --prompt x --top-p 0
  expect_usage "dtrain generate: --max-new-tokens -1: accepted 0 to 65536" $D generate --prompt x --max-new-tokens -1
  expect_usage "dtrain plan: --params 1e300: accepted 0 (count the --model's parameters) or 1 to 1e15" $D plan --params 1e300
  expect_usage "dtrain plan: --params nan: not a finite number" $D plan --params nan
  expect_usage "dtrain plan: --params -5: accepted" $D plan --params -5
  # CLI11's own errors are one line too.
  expect_usage "dtrain train: The following argument was not expected: --bogus" $D train --bogus
  expect_usage "--layers" $D train --layers
  # Sizes the machine cannot hold are refused up front, with the estimate in bytes.
  expect_usage "the model (" $D train --layers 1024 --d-model 65536 --heads 1 "${R[@]}"
  grep -Eq "the model \([0-9]{14} parameters\)" err.txt || fail "no exact parameter count: $(cat err.txt)"
  grep -q "bytes: weights, gradients and AdamW state" err.txt && grep -q "this machine has" err.txt || fail "no estimate: $(cat err.txt)"
  # A sparse 4 TB file (where the file system allows one): refused before it is read.
  if truncate -s 4T big.txt 2>/dev/null; then
    expect_usage "--data text:big.txt: needs about" $D train --data text:big.txt --context 8 "${R[@]}"
    expect_usage "--data tokens:big.txt: needs about" $D train --data tokens:big.txt:2 --context 1 "${R[@]}"
    rm -f big.txt
  fi
  # The range is in --help, and docs/cli.md holds exactly what `dtrain ranges` prints.
  $D train --help >help.txt || fail "train --help"  # (grep -q on a pipe would cut it short)
  grep -q -- "--layers INT .*\[1 to 1024\]" help.txt || fail "train --help lacks the range of --layers"
  $D ranges >ranges.md || fail "dtrain ranges"
  sed -n '/^<!-- dtrain ranges -->$/,/^<!-- end dtrain ranges -->$/p' "$DOCS/cli.md" | sed '1d;$d' >documented.md
  diff ranges.md documented.md || fail "docs/cli.md's table of ranges differs from dtrain ranges (paste its output)"
  # In range: a short run with the new --timeout over 2 ranks.
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --dp 2 --timeout 30 --out to >/dev/null 2>&1 || fail "train --timeout 30"
  ;;
plan)
  # The ZeRO paper's Table 1 (7.5B parameters, N = 64, mixed-precision Adam, K = 12).
  $D plan --params 7.5e9 --dp 64 --json plan.json >plan.txt || fail "plan"
  cat plan.txt
  for want in "120.0 GB" "31.4 GB" "16.6 GB" "1.9 GB"; do grep -q "$want" plan.txt || fail "plan lacks $want"; done
  $D plan --params 1e9 --dp 4 --micro-batch 2 --accumulation 8 | grep >/dev/null "2 x 4 x 8 = 64" || fail "effective batch"
  grep -q '"total_bytes": 120000000000' plan.json || fail "plan JSON lacks the baseline total"
  $D plan --model gpt-tiny --dp 2 --zero 3 | grep >/dev/null "ZeRO-3" || fail "plan of a model"
  # A model far too large to build here is counted by the library, not built: 1024 blocks of
  # width 65536 hold 12 d^2 weights each, plus the biases, norms and embeddings.
  $D plan --model gpt-tiny --layers 1024 --d-model 65536 --heads 1 --dp 1024 --zero 3 --json big.json >/dev/null \
    || fail "plan of a model too large to build"
  python3 -c "import json; p = json.load(open('big.json'))['params']; print('params', p); \
assert 12 * 1024 * 65536**2 < p < 12.01 * 1024 * 65536**2" || fail "plan's parameter count"
  expect_error "--zero" $D plan --params 1e9 --zero 4
  # --expert-load: a cost-model figure of a mixture's, in range.
  expect_usage "--expert-load and --expert-load-peak price the experts' rows on a cluster" $D plan --model gpt-tiny --experts 4 --ep 2 --expert-load 1.2
  expect_error "expert_load n_experts" $D plan --model gpt-tiny --cluster cpu-default --expert-load 1.2
  expect_error "--expert-load" $D plan --model gpt-tiny --experts 4 --ep 2 --cluster cpu-default --expert-load 0.5
  # The cost model's memory is an inventory of what the library allocates: each layout's
  # predicted peak per rank against the ledger's over the training steps (bench/bench_plan.py
  # times them too, on this machine calibrated, with more layouts and models).
  M=(--layers 2 --d-model 64 --heads 4 --context 32 --precision f32)
  layouts=("--dp 2 --zero 3" "--tp 2 --sp" "--pp 2 --micro-batches 2" "--dp 2 --tp 2 --pp 2 --micro-batches 2"
    "--pp 2 --micro-batches 2 --recompute" "--cp 2" "--dp 2 --cp 2 --zero 1" "--experts 4" "--experts 4 --tp 2 --sp"
    "--experts 4 --moe-capacity 1 --ep 2" "--experts 4 --ep 2")
  # Under a sanitizer (tests/CMakeLists.txt), two of them: the bytes do not change there.
  [[ "${DTRAIN_SANITIZED:-0}" == 1 ]] && layouts=("--dp 2 --cp 2 --zero 1" "--experts 4 --moe-capacity 1 --ep 2")
  for layout in "${layouts[@]}"; do
    read -r -a L <<<"$layout"
    dp=1; [[ $layout == *"--dp 2"* ]] && dp=2
    ep=1; [[ $layout == *"--ep 2"* ]] && ep=2
    m=1; [[ $layout == *"--micro-batches 2"* ]] && m=2
    mb=$((4 / dp / ep / m))  # sequences per rank per micro-batch of --batch 4 (ep ranks route their own)
    $D train --data "text:$(dirname "$0")/../../README.md" --batch 4 --steps 3 --no-progress --threads 1 --report \
      --eval-problems 0 --show 0 "${M[@]}" "${L[@]}" --out pt --json pt.json >/dev/null 2>&1 || fail "train $layout"
    # Dropless under ep the router decides the busiest rank's rows: the plan takes them as
    # --report measured them (one rank's run would measure the same: the routing is alike).
    load=()
    [[ $ep == 2 && $layout != *capacity* ]] && load=(--expert-load-peak "$(python3 -c \
      "import json; print(json.load(open('pt.json'))['report']['moe']['busiest_rank_over_even_by_ep']['2']['peak'])")")
    $D plan "${M[@]}" "${L[@]}" --micro-batch $mb --cluster cpu-default "${load[@]}" --json pc.json >pc.txt \
      || fail "plan --cluster $layout ${load[*]}"
    python3 - "$layout" <<'PY' || fail "predicted peak memory against the ledger: $layout"
import json, sys
p = json.load(open("pc.json"))["cost"]["peak_bytes"]
m = max(json.load(open("pt.json"))["report"]["training_peak_bytes"].values())
print("%s: predicted peak %.0f, ledger %.0f (%+.2f%%)" % (sys.argv[1], p, m, 100 * (p / m - 1)))
assert abs(p / m - 1) <= 0.05
PY
  done
  grep -q "step .* tokens/s" pc.txt || fail "plan --cluster prints no step time"
  # --auto: a 1.3B GPT on two DGX H100 nodes (docs/planner.md has the seeds' larger cases).
  $D plan --auto --cluster h100-node:2 --layers 24 --d-model 2048 --heads 16 --vocab 50304 --context 2048 \
    --global-batch 64 --top 3 --json auto.json >auto.txt || fail "plan --auto"
  cat auto.txt
  python3 -c "import json; s = json.load(open('auto.json'))['search']; b = s['best']; print(b[0]['layout']); \
assert s['devices'] == 16 and len(b) == 3 and b[0]['step_s'] <= b[1]['step_s'] and b[1]['loses_by'] != '-'" \
    || fail "plan --auto's ranking"
  expect_error "cluster nosuch h100-node" $D plan --model gpt-tiny --cluster nosuch
  expect_error "global-batch" $D plan --model gpt-tiny --auto --cluster h100-node
  echo '{"name": "x", "devices_per_host": 2, "matmul_flops_f32": -1}' >bad.json
  expect_error "cluster.device_memory" $D plan --model gpt-tiny --cluster bad.json
  # --median-of: several calibrations of one machine, each figure's median (three copies of a
  # cluster file whose fitted efficiency differs).
  python3 - "$DOCS/clusters/four-l4.json" <<'PY' || fail "median-of inputs"
import json, sys
c = json.load(open(sys.argv[1]))
for i, eff in enumerate((0.94, 1.21, 1.02)):
    c["compute_efficiency"] = eff
    json.dump(c, open("cal%d.json" % i, "w"))
PY
  $D plan --median-of cal0.json cal1.json cal2.json --json calm.json >calm.txt 2>&1 || { cat calm.txt; fail "plan --median-of"; }
  python3 -c "import json; c = json.load(open('calm.json')); assert c['compute_efficiency'] == 1.02, c" \
    || fail "plan --median-of: not the median"
  expect_usage "--median-of writes a cluster file" $D plan --median-of cal0.json
  expect_usage "--median-of nosuch.json: could not be read" $D plan --median-of nosuch.json --json calm.json
  expect_error "clusters.1. cluster.device_memory" $D plan --median-of cal0.json bad.json --json calm.json
  expect_usage "--calibrate-repeats 2 with --backend mpi" $D plan --calibrate --calibrate-repeats 2 --backend mpi
  # --serve: a Llama-2-7B shape served on a DGX H100 (docs/planner.md): one layout's memory
  # and latency, then every layout ranked by tokens/s within a 20 ms inter-token latency.
  L7=(--layers 32 --d-model 4096 --heads 32 --d-ff 11008 --act swiglu --pos rope --norm rmsnorm --vocab 32000 --context 4096)
  $D plan --serve --cluster h100-node "${L7[@]}" --dp 4 --tp 2 --prompt 1024 --output 256 --json sv.json >sv.txt \
    || { cat sv.txt; fail "plan --serve"; }
  cat sv.txt
  $D plan --serve --auto --cluster h100-node "${L7[@]}" --prompt 1024 --output 256 --itl-target-ms 20 --top 3 \
    --json sa.json >sa.txt || { cat sa.txt; fail "plan --serve --auto"; }
  cat sa.txt
  python3 - <<'PY' || fail "plan --serve figures"
import json
c = json.load(open("sv.json"))["serve_cost"]
assert c["layout"] == {"replicas": 4, "tp": 2, "pp": 1} and c["fits"], c
assert c["batch_limited_by"] == "memory" and c["batch"] == c["max_batch_by_memory"] > 1, c
r = c["ranks"][0]["memory"]
assert abs(r["weights"] + r["kv_cache"] + r["workspace"] - c["peak_bytes"]) < 1 and c["peak_bytes"] <= c["budget_bytes"], c
s = json.load(open("sa.json"))["serve_search"]
b = s["best"]
print("best serving layout:", b[0]["layout"], "%.0f tokens/s, ITL %.1f ms" % (b[0]["tokens_per_s"], 1e3 * b[0]["itl_s"]))
assert s["devices"] == 8 and len(b) == 3 and all(x["itl_s"] <= 0.020 for x in b), s
assert b[0]["tokens_per_s"] >= b[1]["tokens_per_s"] >= b[2]["tokens_per_s"] and b[1]["loses_by"] != "-", b
PY
  expect_usage "--serve --auto chooses --dp (replicas), --tp and --pp" $D plan --serve --auto --cluster h100-node "${L7[@]}" --tp 2
  expect_usage "--serve costs serving on a cluster" $D plan --serve "${L7[@]}"
  expect_error "prompt output 4096" $D plan --serve --cluster h100-node "${L7[@]}" --prompt 4000 --output 200
  expect_usage "--itl-target-ms -1" $D plan --serve --cluster h100-node "${L7[@]}" --itl-target-ms -1
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
  grep -q "report: memory per rank" rep.txt && grep -q "gradient traffic per train step" rep.txt || { cat rep.txt; fail "report text"; }
  expect_ledgers dr.json dp
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
  # A mixture of experts: dp 2 against one rank running the same micro-batches (the
  # auxiliary losses are per micro-batch), --report's routing, generation from it.
  MOE=(--experts 4 --top-k 2 --steps 6 --eval-problems 0)
  $D train "${TINY[@]}" "${MOE[@]}" --micro-batches 2 --out m1 --json m1.json >/dev/null 2>&1 || fail "moe: one rank"
  $D train "${TINY[@]}" "${MOE[@]}" --dp 2 --out m2 --json m2.json --report >mrep.txt 2>&1 || { cat mrep.txt; fail "moe: dp 2"; }
  grep -q "report: mixture of experts, 4 experts" mrep.txt || { cat mrep.txt; fail "moe report text"; }
  python3 - <<'PY' || fail "moe: dp 2 differs from one rank, or its report"
import json
a, b = (json.load(open(f)) for f in ("m1.json", "m2.json"))
print("moe final loss one rank %.9f dp2 %.9f" % (a["final_loss"], b["final_loss"]))
assert abs(a["final_loss"] - b["final_loss"]) <= 1e-5 * abs(a["final_loss"])
m = b["report"]["moe"]
# 6 steps x 1 block x 16 sequences x their tokens x top 2: every choice kept (dropless).
assert len(m["tokens_per_expert"]) == 4 and m["dropped"] == 0 and sum(m["tokens_per_expert"]) == m["choices"], m
assert m["aux_loss_per_step"] > 0 and m["z_loss_per_step"] > 0, m
PY
  $D generate --checkpoint m2/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from a moe run"
  # Expert parallelism: the experts over 2 ranks, each routing its own 8 rows; --report's all-to-all.
  $D train "${TINY[@]}" "${MOE[@]}" --ep 2 --out m4 --json m4.json --report >erep.txt 2>&1 || { cat erep.txt; fail "moe: ep 2"; }
  grep -q "all-to-all per step" erep.txt || { cat erep.txt; fail "ep report text"; }
  python3 - <<'PY' || fail "moe: ep 2 differs from one rank, or its report"
import json
a, b = (json.load(open(f)) for f in ("m1.json", "m4.json"))
print("moe final loss one rank %.9f ep2 %.9f" % (a["final_loss"], b["final_loss"]))
assert abs(a["final_loss"] - b["final_loss"]) <= 1e-5 * abs(a["final_loss"])
m = b["report"]["moe"]
assert m["all_to_all_bytes_per_step"] > 0 and m["all_to_all_bytes_per_step_uniform"] > 0, m
PY
  expect_ledgers m4.json ep  # dp 1: the shared gradients over ep, the experts' nowhere
  # With ZeRO-1 over dp beside ep 2: 4 ranks of 4 rows against one rank of 4 micro-batches.
  $D train "${TINY[@]}" "${MOE[@]}" --micro-batches 4 --out m7 --json m7.json >/dev/null 2>&1 || fail "moe: one rank, 4 micro"
  $D train "${TINY[@]}" "${MOE[@]}" --ep 2 --dp 2 --zero 1 --out m5 --json m5.json --report >/dev/null 2>&1 \
    || fail "moe: ep 2 x dp 2 zero 1"
  expect_ledgers m5.json "dp ep"  # the shared gradients all-reduced over ep, then ZeRO over dp
  # DDP beside ep: the experts' gradients over dp, the rest over dp x ep; ZeRO-2 reduces every
  # micro-batch (over ep first for the shared ones).
  $D train "${TINY[@]}" "${MOE[@]}" --steps 2 --ep 2 --dp 2 --out m9 --json m9.json --report >/dev/null 2>&1 \
    || fail "moe: ep 2 x dp 2 report"
  expect_ledgers m9.json "dp dp*ep"
  $D train "${TINY[@]}" "${MOE[@]}" --steps 2 --ep 2 --dp 2 --zero 2 --micro-batches 2 --out m10 --json m10.json \
    --report >/dev/null 2>&1 || fail "moe: ep 2 x dp 2 zero 2 report"
  expect_ledgers m10.json "dp ep"
  python3 - <<'PY' || fail "moe: ep 2 x dp 2 with ZeRO-1 differs from one rank"
import json
a, b = (json.load(open(f)) for f in ("m7.json", "m5.json"))
print("moe final loss one rank %.9f ep2 dp2 zero1 %.9f" % (a["final_loss"], b["final_loss"]))
assert abs(a["final_loss"] - b["final_loss"]) <= 1e-5 * abs(a["final_loss"])
PY
  expect_error "shards data-parallel" $D train "${TINY[@]}" "${MOE[@]}" --ep 2 --zero 1 --out m8
  $D train "${TINY[@]}" "${MOE[@]}" --ep 2 --out m6 --trace m6/trace.json >/dev/null 2>&1 || fail "ep trace"
  python3 - <<'PY' || fail "the ep trace lacks the experts' all-to-all on a comm track"
import json
t = json.load(open("m6/trace.json"))["traceEvents"]
assert any(e.get("name", "").startswith("all_to_all experts dispatch") and e.get("cat") == "comm" for e in t)
PY
  expect_error "top_k" $D train "${TINY[@]}" --experts 2 --top-k 3 --steps 1 --out m3
  # Context parallelism: each example's 12 tokens in 4 chunks over 2 ranks (ring attention),
  # against one rank; --report's ring bytes against the formula; the ring on the comm tracks.
  CP=(--data addition --digits 3 --layers 1 --d-model 32 --heads 2 --batch 16 --no-progress --threads 1 --steps 6
      --eval-problems 0)
  $D train "${CP[@]}" --out c1 --json c1.json >/dev/null 2>&1 || fail "cp: one rank"
  $D train "${CP[@]}" --cp 2 --out c2 --json c2.json --report --trace c2/trace.json >crep.txt 2>&1 || { cat crep.txt; fail "cp 2"; }
  grep -q "report: context parallel over cp = 2" crep.txt || { cat crep.txt; fail "cp report text"; }
  python3 - <<'PY' || fail "cp 2 differs from one rank, or its report or trace"
import json
a, b = (json.load(open(f)) for f in ("c1.json", "c2.json"))
print("cp final loss one rank %.9f cp2 %.9f" % (a["final_loss"], b["final_loss"]))
assert abs(a["final_loss"] - b["final_loss"]) <= 1e-5 * abs(a["final_loss"])
r = b["report"]["cp"]
assert r["ring_bytes_per_step_measured"] == r["ring_bytes_per_step_formula"] > 0, r
t = json.load(open("c2/trace.json"))["traceEvents"]
assert any(e.get("name", "").startswith("cp ring kv") and e.get("cat") == "comm" for e in t)
PY
  expect_ledgers c2.json cp  # cp ranks hold the same parameters: their gradients summed over cp
  expect_error "does not split into 2 x cp = 4 equal chunks" $D train "${TINY[@]}" --cp 2 --steps 1 --out c3
  $D plan --model gpt-small --cp 4 --context 1024 --json cplan.json >cplan.txt 2>&1 || { cat cplan.txt; fail "plan --cp"; }
  grep -q "context parallel over cp = 4" cplan.txt || { cat cplan.txt; fail "plan --cp text"; }
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
  # the wire bytes per step come to the formula's 3 M psi x (N-1)/N x 4 bytes (M = 2
  # micro-batches, each gathering the weights for forward and backward and reduce-scattering).
  $D train "${TINY[@]}" --steps 2 --eval-problems 0 --out zr --dp 2 --zero 3 --micro-batches 2 --report --json zr.json \
    >rep.txt 2>&1 || { cat rep.txt; fail "zero report"; }
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
tp)
  # Tensor parallel over 2 ranks, and dp 2 x tp 2: the losses of one rank, to rounding; the
  # checkpoint is in the single-rank layout (generate reads it; a tp 2 run resumes from a
  # one-rank run's checkpoint and ends where one rank does); with --sp, and ZeRO-3 inside
  # the tp groups; what is not built is refused.
  TPM=(--data addition --digits 2 --layers 1 --d-model 32 --heads 4 --batch 16 --no-progress --threads 1)
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out t1 --json t1.json >/dev/null 2>&1 || fail "tp: one rank"
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out t2 --json t2.json --tp 2 >t2.txt 2>&1 || { cat t2.txt; fail "tp 2"; }
  grep -q "over dp = 1 x tp = 2 ranks, tensor parallel" t2.txt || { cat t2.txt; fail "tp 2: the layout line"; }
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out t4 --json t4.json --tp 2 --dp 2 >/dev/null 2>&1 || fail "dp 2 x tp 2"
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out ts --json ts.json --tp 2 --sp --dp 2 >ts.txt 2>&1 || { cat ts.txt; fail "dp 2 x tp 2 --sp"; }
  grep -q "over dp = 2 x tp = 2 ranks, DDP, tensor + sequence parallel" ts.txt || { cat ts.txt; fail "--sp: the layout line"; }
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out tz --json tz.json --tp 2 --sp --dp 2 --zero 3 >tz.txt 2>&1 || { cat tz.txt; fail "dp 2 x tp 2 --sp --zero 3"; }
  $D train "${TPM[@]}" --steps 10 --stop-at 5 --eval-problems 0 --out tr >/dev/null 2>&1 || fail "tp: the first half on one rank"
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out tr --resume --tp 2 --json tr.json >/dev/null 2>&1 || fail "tp: resumed on tp 2"
  python3 - <<'PY' || fail "tp losses differ from one rank"
import json
a = [json.load(open(f))["final_loss"] for f in ("t1.json", "t2.json", "t4.json", "tr.json", "ts.json", "tz.json")]
print("final loss one rank %.9f, tp 2 %.9f, dp 2 x tp 2 %.9f, resumed on tp 2 %.9f, dp 2 x tp 2 sp %.9f, "
      "+ zero 3 %.9f" % tuple(a))
assert all(abs(x - a[0]) <= 1e-5 * abs(a[0]) for x in a), a
PY
  $D generate --checkpoint t4/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from a tp run"
  # Generation on tp 2 and 4 ranks (the KV cache sharded by heads) gives one rank's text.
  $D generate --checkpoint t4/ckpt --prompt "12+34=" --max-new-tokens 4 --json g1.json >/dev/null 2>&1 || fail "generate: one rank"
  for n in 2 4; do
    $D generate --checkpoint t4/ckpt --prompt "12+34=" --max-new-tokens 4 --tp $n --json g$n.json >g$n.txt 2>&1 || { cat g$n.txt; fail "generate --tp $n"; }
  done
  python3 - <<'PY' || fail "generate --tp differs from one rank"
import json
a = [json.load(open(f))["text"] for f in ("g1.json", "g2.json", "g4.json")]
print("generated one rank %r, tp 2 %r, tp 4 %r" % tuple(a))
assert a[0] == a[1] == a[2], a
PY
  expect_error "n_head = 4 does not split over tp = 3" $D generate --checkpoint t4/ckpt --prompt "1+1=" --tp 3
  expect_error "n_head = 4 does not split over tp = 3" $D train "${TPM[@]}" --steps 1 --tp 3 --out t3
  # --report: tp traffic per step measured against the library's plan, to the byte; and
  # dtrain plan --tp --sp gives the same formula and each tp rank's parameters (2-digit
  # addition: sequences of 9 tokens, micro-batches of 16 / dp 2 / 2 = 4; the model has one
  # position more, context 10, so that the last answer token can be generated).
  $D train "${TPM[@]}" --steps 3 --eval-problems 0 --out trep --tp 2 --dp 2 --sp --micro-batches 2 --report \
    --json trep.json >trep.txt 2>&1 || { cat trep.txt; fail "tp --report"; }
  $D plan "${TPM[@]:4:6}" --context 9 --tp 2 --sp --dp 2 --micro-batch 4 --accumulation 2 --precision f32 \
    --json plan.json >plan.txt 2>&1 || { cat plan.txt; fail "plan --tp --sp"; }
  $D plan "${TPM[@]:4:6}" --context 10 --tp 2 --precision f32 --json plan10.json >/dev/null 2>&1 || fail "plan --context 10"
  # --trace: each tp collective is a span on its rank's comm track.
  $D train "${TPM[@]}" --steps 2 --eval-problems 0 --out ttr --tp 2 --sp --trace ttr.json >/dev/null 2>&1 || fail "tp --trace"
  for k in "tp all_gather" "tp reduce_scatter" "tp all_reduce"; do
    grep -q "$k" ttr.json || fail "tp --trace: no \"$k\" span"
  done
  python3 - <<'PY' || fail "tp report or plan differs from the formula"
import json
r = json.load(open("trep.json"))["report"]
p = json.load(open("plan.json"))["tensor_parallel"]
print("tp wire bytes per step measured %d, formula %d, plan %d; params per tp rank %d"
      % (r["tp_wire_bytes_per_step"], r["tp_wire_bytes_formula"], p["tp_comm"]["wire_bytes_per_step"],
         p["params_per_tp_rank"]))
assert r["tp_wire_bytes_per_step"] == r["tp_wire_bytes_formula"] == p["tp_comm"]["wire_bytes_per_step"]
p10 = json.load(open("plan10.json"))["tensor_parallel"]
assert p10["params_per_tp_rank"] == r["tp_plan"]["params_per_tp_rank"] < p10["params"]
for row in r["per_rank"]:  # each rank's weights: its tp part, to the byte
    assert row["param"]["current"] == row["param"]["formula"], row
PY
  expect_error "--sp splits the tokens over the tensor-parallel ranks; accepted with --tp >= 2" \
    $D train "${TPM[@]}" --steps 1 --sp --dp 2 --out tsp
  ;;
pp)
  # Pipeline parallelism. The plan: gpt-small (6 blocks) over 4 stages, 8 micro-batches:
  # 1F1B's bubble 3/11 simulated and by formula, its peaks 4 3 2 1 against GPipe's 8 on
  # stage 0, interleaving's smaller bubble, the simulated Chrome trace; bad input refused
  # naming the flag. Then training over dp 2 x pp 2 x tp 2: one rank's losses to rounding,
  # and --report's measured peaks and traffic equal to the plan's.
  PLAN=(--model gpt-small --pp 4 --micro-batches 8)
  $D plan "${PLAN[@]}" --pp-schedule 1f1b --json 1f1b.json --timeline-trace tl.json >plan.txt 2>&1 || { cat plan.txt; fail "plan --pp 4"; }
  cat plan.txt
  grep -q "bubble: simulated 27.3%, formula (P-1)/(M+P-1) = 3/11 = 27.3%" plan.txt || fail "plan: the 1f1b bubble"
  grep -q "simulated: 4 3 2 1; formula on rank 0: 4" plan.txt || fail "plan: the 1f1b activation peaks"
  grep -q "^rank 3 |" plan.txt || fail "plan: no timeline"
  $D plan "${PLAN[@]}" --pp-schedule gpipe --json gpipe.json >/dev/null 2>&1 || fail "plan gpipe"
  $D plan "${PLAN[@]}" --layers 8 --pp-schedule interleaved --virtual-stages 2 --json inter.json >inter.txt 2>&1 \
    || { cat inter.txt; fail "plan interleaved"; }
  python3 - <<'PY' || fail "plan: pipeline figures"
import json
a, g, i = (json.load(open(f))["pipeline"] for f in ("1f1b.json", "gpipe.json", "inter.json"))
print("bubble 1f1b %.4f, gpipe %.4f, interleaved v=2 %.4f; stage 0 peak 1f1b %d, gpipe %d"
      % (a["bubble_fraction"], g["bubble_fraction"], i["bubble_fraction"], a["activation_peak"][0], g["activation_peak"][0]))
assert abs(a["bubble_fraction"] - 3 / 11) < 1e-9 and abs(a["bubble_formula"] - 3 / 11) < 1e-9
assert a["activation_peak"] == [4, 3, 2, 1] and g["activation_peak"] == [8, 8, 8, 8]
assert i["bubble_fraction"] < a["bubble_fraction"] and abs(i["bubble_fraction"] - i["bubble_formula"]) < 1e-9
assert a["boundaries"][0] == 0 and a["boundaries"][-1] == 6 and len(a["boundaries"]) == 5
assert abs(sum(s["params"] for s in a["stages"]) - json.load(open("1f1b.json"))["params"]) < 0.5
t = json.load(open("tl.json"))["traceEvents"]
assert sum(1 for e in t if e["ph"] == "X" and e["cat"] == "compute") == 4 * 8 * 2  # a forward, a backward each
PY
  # Without a model: the schedule alone, as data (each rank's actions) and simulated. The
  # seeds' forward-only pipeline: M + P - 1 ticks, 25% utilization at P = 4, M = 1 and
  # 4/7 = 57.1% at M = 4; ZB-H1's bubble a third of 1F1B's idle time.
  $D plan --pp 4 --micro-batches 8 --pp-schedule 1f1b >s.txt 2>&1 || { cat s.txt; fail "plan --pp without a model"; }
  grep -q "rank 3: recvA0 F0 B0 sendG0 recvA1" s.txt || { cat s.txt; fail "plan: the schedule's actions"; }
  grep -q "bubble: simulated 27.3%, formula (P-1)/(M+P-1) = 3/11 = 27.3%; utilization 72.7%" s.txt || fail "plan: schedule bubble"
  $D plan --pp 4 --micro-batches 1 --pp-schedule forward | grep -q "utilization 25.0%" || fail "forward-only M 1: 25%"
  $D plan --pp 4 --micro-batches 4 --pp-schedule forward | grep -q "makespan 7 time units" || fail "forward-only: M + P - 1"
  $D plan --pp 4 --micro-batches 4 --pp-schedule forward | grep -q "utilization 57.1%" || fail "forward-only M 4: 4/7"
  $D plan --pp 4 --micro-batches 8 --pp-schedule zb-h1 | grep -q "formula (P-1)/(3M+P-1) = 3/27" || fail "zb-h1 bubble"
  expect_error "--pp-schedule pp_schedule foo gpipe 1f1b" $D plan "${PLAN[@]}" --pp-schedule foo
  expect_error "--micro-batches divisible" $D plan "${PLAN[@]}" --layers 8 --micro-batches 6 --pp-schedule interleaved --virtual-stages 2
  expect_error "--pp more than the model's 6 blocks" $D plan --model gpt-small --pp 8
  expect_usage "--pp-schedule applies to pipeline parallelism; accepted with --pp >= 2" $D plan --model gpt-small --pp-schedule gpipe
  expect_usage "--virtual-stages 0: accepted 1 to 64" $D plan "${PLAN[@]}" --virtual-stages 0
  # Training: 2 blocks over pp 2, each rank of dp 2 x pp 2 x tp 2 a thread of this process.
  PPM=(--data addition --digits 2 --layers 2 --d-model 32 --heads 4 --batch 16 --no-progress --threads 1 --micro-batches 4)
  $D train "${PPM[@]}" --steps 10 --eval-problems 0 --out p1 --json p1.json >/dev/null 2>&1 || fail "pp: one rank"
  $D train "${PPM[@]}" --steps 10 --eval-problems 0 --out p8 --json p8.json --pp 2 --tp 2 --dp 2 --report >p8.txt 2>&1 \
    || { cat p8.txt; fail "dp 2 x pp 2 x tp 2"; }
  cat p8.txt
  grep -q "over dp = 2 x pp = 2 x tp = 2 ranks, DDP, tensor parallel, pipeline 1f1b over 4 micro-batches" p8.txt \
    || fail "pp: the layout line"
  grep -Eq "bubble: measured [0-9.]+% \(mean over 10 steps\), simulated 20.0%, formula 20.0%" p8.txt || fail "pp: the bubble line"
  $D train "${PPM[@]}" --steps 10 --eval-problems 0 --out pg --json pg.json --pp 2 --pp-schedule gpipe --report \
    >pg.txt 2>&1 || { cat pg.txt; fail "pp 2 gpipe"; }
  python3 - <<'PY' || fail "pp: losses or report differ"
import json
a, b, c = (json.load(open(f)) for f in ("p1.json", "p8.json", "pg.json"))
print("final loss one rank %.9f, dp 2 x pp 2 x tp 2 %.9f, pp 2 gpipe %.9f" % (a["final_loss"], b["final_loss"], c["final_loss"]))
assert all(abs(x["final_loss"] - a["final_loss"]) <= 1e-5 * abs(a["final_loss"]) for x in (b, c))
for s, peaks in ((b, [2, 1]), (c, [4, 4])):
    r = s["report"]
    p = r["pipeline"]
    assert [st["activation_peak"] for st in p["stages"]] == [st["activation_peak_simulated"] for st in p["stages"]] == peaks, p
    assert abs(p["bubble_formula"] - 0.2) < 1e-9 and 0 <= p["bubble_measured"] < 1 and p["steps"] == 10, p
    assert p["pp_send_bytes_per_step"] == p["pp_send_bytes_per_step_plan"], p
    for row in r["per_rank"]:  # each rank's stage, to the byte (the optimizer's step counters apart)
        assert row["param"]["current"] == row["param"]["formula"] and row["grad"]["current"] == row["grad"]["formula"], row
assert b["report"]["tp_wire_bytes_per_step"] == b["report"]["tp_wire_bytes_formula"]
PY
  # ZB-H1: the backward split into input and weight passes; one rank's loss again.
  $D train "${PPM[@]}" --steps 10 --eval-problems 0 --out pz --json pz.json --pp 2 --pp-schedule zb-h1 >pz.txt 2>&1 \
    || { cat pz.txt; fail "pp 2 zb-h1"; }
  python3 -c "import json; a, z = (json.load(open(f))['final_loss'] for f in ('p1.json', 'pz.json')); print('zb-h1 final loss', z); assert abs(z - a) <= 1e-5 * abs(a)" \
    || fail "pp: zb-h1 loss differs from one rank"
  $D generate --checkpoint p8/ckpt --prompt "12+34=" --max-new-tokens 4 >g1.txt 2>/dev/null || fail "generate from a pp run"
  # Generation over 2 stages x tp 2 (each stage its blocks and their KV cache): one rank's text.
  $D generate --checkpoint p8/ckpt --prompt "12+34=" --max-new-tokens 4 --pp 2 --tp 2 >g4.txt 2>/dev/null \
    || fail "generate --pp 2 --tp 2"
  cmp -s g1.txt g4.txt || { cat g1.txt g4.txt; fail "generate --pp 2 --tp 2: not one rank's text"; }
  expect_usage "--pp-blocks applies to pipeline parallelism; accepted with --pp >= 2" \
    $D train "${PPM[@]}" --steps 1 --pp-blocks 1,1 --out pb
  expect_error "--pp pp (4) more than the model's 2 blocks" $D train "${PPM[@]}" --steps 1 --pp 4 --out p4
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
  # Elastic restart: 20 steps of one rank against np 4 (ZeRO-1) stopped at 10, resumed on np 2
  # (ZeRO-3) to 15 and on np 8 (DDP) to 20. Every save is sharded (each process writes its
  # own file); each resume reads the boxes its ranks hold, the loader at the saved position.
  $D train "${TINY[@]}" --steps 20 --eval-problems 0 --out el1 --json el1.json >/dev/null 2>&1 || fail "elastic: one rank"
  "$MPIEXEC" -np 4 --oversubscribe $D train "${TINY[@]}" --backend mpi --zero 1 --steps 20 --stop-at 10 --eval-problems 0 \
    --out el >el4.txt 2>&1 || { cat el4.txt; fail "elastic: np 4"; }
  [ "$(ls el/ckpt.*.r*.safetensors | wc -l)" = 4 ] || { ls el; fail "elastic: np 4 did not write 4 shard files"; }
  "$MPIEXEC" -np 2 --oversubscribe $D train "${TINY[@]}" --backend mpi --zero 3 --steps 20 --stop-at 15 --eval-problems 0 \
    --out el --resume >el2.txt 2>&1 || { cat el2.txt; fail "elastic: np 4 -> np 2"; }
  "$MPIEXEC" -np 8 --oversubscribe $D train "${TINY[@]}" --backend mpi --steps 20 --eval-problems 0 --out el --resume \
    --json el.json >el8.txt 2>&1 || { cat el8.txt; fail "elastic: np 2 -> np 8"; }
  python3 - <<'PY' || fail "an elastic restart (np 4 -> 2 -> 8) differs from one rank"
import json
a, b = (json.load(open(f))["final_loss"] for f in ("el1.json", "el.json"))
print("final loss one rank %.9f, np 4 -> np 2 -> np 8 %.9f" % (a, b))
assert abs(a - b) <= 1e-5 * abs(a), (a, b)
io = json.load(open("el.json"))["checkpoint_io"]  # the np 8 run: read np 2's 2 files, wrote 8
assert io["files"] == 8 and io["loaded_files"] == 2 and io["bytes"] > 0 and io["load_seconds"] >= 0, io
PY
  # dtrain checkpoint: the layout that saved it and each writer's file; consolidated into one
  # rank's checkpoint, which generates what the sharded one does.
  $D checkpoint inspect el --json eli.json >eli.txt || { cat eli.txt; fail "checkpoint inspect"; }
  grep -q "saved by 8 ranks: dp 8" eli.txt || { cat eli.txt; fail "checkpoint inspect: the layout"; }
  python3 -c "import json; i = json.load(open('eli.json')); assert len(i['files']) == 8 and i['layout']['world'] == 8, i" ||
    fail "checkpoint inspect JSON"
  $D checkpoint consolidate el elc >/dev/null || fail "checkpoint consolidate"
  [ "$(ls elc/ckpt.*.safetensors | wc -l)" = 1 ] || fail "consolidate wrote more than one file"
  a=$($D generate --checkpoint el/ckpt --prompt "12+34=" --max-new-tokens 4 2>/dev/null)
  b=$($D generate --checkpoint elc/ckpt --prompt "12+34=" --max-new-tokens 4 2>/dev/null)
  [ -n "$a" ] && [ "$a" == "$b" ] || fail "the consolidated checkpoint generates '$b', the sharded one '$a'"
  expect_usage "neither a run directory" $D checkpoint inspect not_a_run
  # Tensor parallel across the two processes: one rank's loss; the checkpoint is rank 0's, whole.
  TPM=(--data addition --digits 2 --layers 1 --d-model 32 --heads 4 --batch 16 --no-progress --threads 1)
  $D train "${TPM[@]}" --steps 10 --eval-problems 0 --out mt1 --json mt1.json >/dev/null 2>&1 || fail "mpi tp: one rank"
  "$MPIEXEC" -np 2 --oversubscribe $D train "${TPM[@]}" --backend mpi --tp 2 --steps 10 --eval-problems 0 \
    --out mtp --json mtp.json >mtp.txt 2>&1 || { cat mtp.txt; fail "mpirun tp 2"; }
  "$MPIEXEC" -np 2 --oversubscribe $D train "${TPM[@]}" --backend mpi --tp 2 --sp --steps 10 --eval-problems 0 \
    --out msp --json msp.json >msp.txt 2>&1 || { cat msp.txt; fail "mpirun tp 2 --sp"; }
  python3 - <<'PY' || fail "mpirun tp loss differs from one rank"
import json
a, b, c = (json.load(open(f))["final_loss"] for f in ("mt1.json", "mtp.json", "msp.json"))
print("final loss one rank %.9f, mpirun tp 2 %.9f, mpirun tp 2 sp %.9f" % (a, b, c))
assert abs(a - b) <= 1e-5 * abs(a) and abs(a - c) <= 1e-5 * abs(a), (a, b, c)
PY
  $D generate --checkpoint mtp/ckpt --prompt "12+34=" --max-new-tokens 4 >/dev/null 2>&1 || fail "generate from an mpirun tp run"
  # dtrain serve under mpirun: rank 0 serves HTTP and schedules, the other process runs its
  # part of each step (tp 2, then 2 replicas); the same checks as the serve case.
  python3 -c "open('corpus.txt', 'w').write('the quick brown fox jumps over the lazy dog. ' * 300)"
  $D train --data text:corpus.txt --context 48 --layers 2 --d-model 32 --heads 4 --batch 16 --no-progress --threads 1 \
    --steps 40 --eval-problems 0 --out tx >tx.txt 2>&1 || { cat tx.txt; fail "training the served model"; }
  for flags in "--tp 2" ""; do
    SERVE_LAUNCH="$MPIEXEC -np 2 --oversubscribe" timeout 300 \
      python3 "$(dirname "$DOCS")/tests/cli/serve_http_test.py" $D tx/ckpt 48 --backend mpi $flags || fail "mpirun serve $flags"
  done
  expect_error "--backend tcp local mpi" $D train "${TINY[@]}" --steps 1 --backend tcp --out mt
  expect_error "--dp --backend" "$MPIEXEC" -np 2 --oversubscribe $D train "${TINY[@]}" --steps 1 --backend mpi --dp 2 --out mt
  ;;
serve)
  # dtrain serve over loopback (tests/cli/serve_http_test.py): a text model trained here,
  # served on one rank, --tp 2, --pp 2 and 2 replicas; each run's completions are `dtrain
  # generate`'s text, bad requests get OpenAI-style errors, a dropped stream is aborted, and
  # Ctrl-C drains and exits 0. Bad flags are refused naming them.
  python3 -c "open('corpus.txt', 'w').write('the quick brown fox jumps over the lazy dog. ' * 300)"
  $D train --data text:corpus.txt --context 48 --layers 2 --d-model 32 --heads 4 --batch 16 --no-progress --threads 1 \
    --steps 40 --eval-problems 0 --out tx >tx.txt 2>&1 || { cat tx.txt; fail "training the served model"; }
  for flags in "" "--tp 2" "--pp 2" "--replicas 2"; do
    timeout 300 python3 "$(dirname "$DOCS")/tests/cli/serve_http_test.py" $D tx/ckpt 48 $flags || fail "serve $flags"
  done
  # The HTTP layer on a hostile network: limits, slow clients, resets, shutdown.
  sanitized=$(grep -qa -e __asan_init -e __tsan_init "$D" && echo --sanitized)
  timeout 300 python3 "$(dirname "$DOCS")/tests/cli/serve_limits_test.py" $D tx/ckpt 48 $sanitized || fail "serve limits"
  # The official openai client (PyPI; skipped when not installed: OPENAI_PYTHON names a
  # Python that has it, such as a venv's).
  timeout 120 "${OPENAI_PYTHON:-python3}" "$(dirname "$DOCS")/tests/cli/serve_openai_test.py" $D tx/ckpt 48 \
    || fail "serve openai"
  expect_usage "--port-file" $D serve --checkpoint tx/ckpt --port 0 --port-file /nonexistent/dir/p
  expect_usage "--port" $D serve --checkpoint tx/ckpt --port 70000
  expect_usage "--max-num-seqs" $D serve --checkpoint tx/ckpt --max-num-seqs 0
  expect_error "stages" $D serve --checkpoint tx/ckpt --pp 4 --port 0
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "cli $CASE passed"
