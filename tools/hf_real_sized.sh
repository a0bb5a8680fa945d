#!/usr/bin/env bash
# A real-sized run of a Hugging Face model, end to end, with no model hub: a directory of
# SmolLM2-135M's shape (LlamaForCausalLM: 30 layers, d_model 576, 9 heads with 3 KV heads,
# d_ff 1536, vocab 49152, tied embeddings; ChatML) is made from its config with random
# weights, inspected, fine-tuned on a few conversations for a few steps under --tp 3 (its 9
# heads and 3 KV heads split in 3) and under --pp 2, exported back to a Hugging Face directory, timed by bench_hf (load vs the
# page cache, batch-1 decode vs the bandwidth bound), and served with chat completions.
#   bash tools/hf_real_sized.sh [BUILD_DIR] [WORK_DIR]      (about 5 minutes on 2 cores)
# The tokenizer is the small ChatML test tokenizer (tests/fixtures/hf/tokenizers/qwen2):
# its ids are a subset of the model's vocabulary, as a real tokenizer's would be.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="$(cd "${1:-$ROOT/build/default}" && pwd)"; W="${2:-/tmp/dtrain-hf-real}"
D="$B/dtrain"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
rm -rf "$W" && mkdir -p "$W/shape" && cd "$W"
cat >shape/config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
 "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192,
 "rms_norm_eps": 1e-05, "rope_theta": 100000, "tie_word_embeddings": true, "vocab_size": 49152,
 "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 510, "eos_token_id": 511}
JSON
cp "$ROOT/tests/fixtures/hf/tokenizers/qwen2/tokenizer.json" shape/
cp "$ROOT/tests/fixtures/hf/chat/smollm2/tokenizer_config.json" "$ROOT/tests/fixtures/hf/chat/smollm2/chat_template.jinja" shape/
echo "== 1. a SmolLM2-135M-shaped model from its config (random weights, bf16, 100 MB shards)"
$D export --model shape --random-init --precision bf16 --max-shard-mb 100 --hf base
$D inspect base
python3 - <<'PY'
import json, random
random.seed(1)
w = "the model learns to answer short questions about numbers and words in a friendly way".split()
with open("chats.jsonl", "w") as f:
    for i in range(32):
        q = " ".join(random.choice(w) for _ in range(8)); a = " ".join(random.choice(w) for _ in range(12))
        f.write(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}) + "\n")
PY
for layout in "--tp 3" "--pp 2"; do
  echo "== 2. fine-tune $layout (4 steps of 4 conversations, the loss on the assistant turns)"
  $D train --init hf:base --data jsonl:chats.jsonl --context 128 --steps 4 --batch 4 --micro-batches 2 \
    --lr 1e-4 $layout --out "run$(echo $layout | tr -d ' -')" --no-progress
done
echo "== 3. export the tp-3 run back to a Hugging Face directory"
$D export --checkpoint runtp3/ckpt --hf tuned --precision bf16
echo "== 4. bench_hf: load vs the page cache, decode vs the bandwidth bound"
"$B/bench/bench_hf" tuned --precision bf16 --json bench_hf.json
echo "== 5. serve it: one chat completion over HTTP"
$D serve --model tuned --port 0 --port-file port.txt --precision bf16 >serve.log 2>&1 &
SERVER=$!
for i in $(seq 1 120); do [ -s port.txt ] && break; sleep 1; done
python3 - "$(cat port.txt)" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", method="POST",
    headers={"Content-Type": "application/json"},
    data=json.dumps({"model": "tuned", "max_tokens": 8, "temperature": 0,
                     "messages": [{"role": "user", "content": "the model learns"}]}).encode())
r = json.load(urllib.request.urlopen(req, timeout=300))
print(json.dumps({"finish_reason": r["choices"][0]["finish_reason"], "usage": r["usage"]}))
PY
kill -INT $SERVER; wait $SERVER || true
echo "hf real-sized run done in $W"
