#!/usr/bin/env python3
"""The anchor for bench_gpu: the same GPT trained and decoded by PyTorch on the same GPU.

bench_gpu's model section trains a GPT-2-style model (LayerNorm with biases, learned
positions, tanh GELU, tied embeddings, biases on every linear) with bf16 compute, AdamW
(lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01) and global-norm clipping at 1.0,
then decodes greedily with a KV cache at batch 1 and 64. This script does the same in
PyTorch as its users run it: f32 master parameters under torch.autocast(bfloat16), fused
AdamW, scaled_dot_product_attention (flash attention), eager mode (no torch.compile, no
CUDA graphs). Throughput and MFU use bench_gpu's formulas, so the two lines compare:
    tokens/s = batch * context / median step time
    MFU      = (6 * params + 6 * layers * d_model * context) * tokens/s / peak
    decode   = batch / mean seconds per decode step (prefill excluded)

    python3 torch_anchor.py [--quick] [--json PATH] [--layers N] [--batch N]
                            [--peak-tflops X] [--device cuda|cpu]
Progress goes to stderr; one line per figure to stdout; --json writes them all.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def progress(what, i, n, note=""):
    print(f"[torch_anchor] {what} {i}/{n} {note}", file=sys.stderr, flush=True)


def attention(q, k, v, causal):
    """Flash attention where PyTorch has it (2.0+: the device image has 2.11); the plain
    formula otherwise, so that the script also runs on older CPU-only PyTorch (a smoke test)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, d, heads, d_ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc = nn.Linear(d, d_ff)
        self.out = nn.Linear(d_ff, d)

    def attend(self, x, cache=None, pos=0):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        if cache is None:
            y = attention(q, k, v, True)
        else:  # cache: (K, V) of [B, H, context, D], filled up to pos
            K, V = cache
            K[:, :, pos:pos + T] = k
            V[:, :, pos:pos + T] = v
            k, v = K[:, :, :pos + T], V[:, :, :pos + T]
            y = attention(q, k, v, T > 1)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cache=None, pos=0):
        x = x + self.attend(self.ln1(x), cache, pos)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, d, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, 4 * d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)
        self.heads, self.d = heads, d

    def forward(self, ids, caches=None, pos=0):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(pos, pos + T, device=ids.device))
        for i, b in enumerate(self.blocks):
            x = b(x, None if caches is None else caches[i], pos)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def train_section(a, dev, report):
    model = GPT(a.vocab, a.context, a.layers, a.d_model, a.heads).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    fused = {"fused": True} if dev.type == "cuda" else {}  # the CUDA kernel PyTorch users pick
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, **fused)
    g = torch.Generator(device="cpu").manual_seed(7)
    ids = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=g).to(dev)
    x, y = ids[:, :-1], ids[:, 1:]
    warmup, steps = 2, (3 if a.quick else 6)
    times = []
    for i in range(warmup + steps):
        progress("train", i + 1, warmup + steps, "warm-up step" if i < warmup else "timed step")
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(dev)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    tok_s = a.batch * a.context / statistics.median(times)
    flops_token = 6.0 * n_params + 6.0 * a.layers * a.d_model * a.context
    mfu = flops_token * tok_s / (a.peak_tflops * 1e12)
    print(f"torch train ({n_params / 1e6:.0f}M params), batch {a.batch} x {a.context}: {tok_s:.0f} tokens/s, "
          f"{flops_token * tok_s * 1e-12:.1f} TFLOP/s, MFU {mfu:.3f} of {a.peak_tflops:.0f} TFLOP/s")
    report["train"] = {"params": n_params, "tokens_per_s": tok_s, "mfu": mfu, "peak_tflops": a.peak_tflops,
                       "step_median_s": statistics.median(times), "final_loss": float(loss)}
    if dev.type == "cuda":
        report["train"]["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    return model


@torch.no_grad()
def decode_section(a, dev, model, report):
    model = model.to(torch.bfloat16).eval()
    prompt, fresh = 64, (16 if a.quick else 64)
    D = a.d_model // a.heads
    for gb in (1, 64):
        ids = torch.tensor([[(r * 31 + t * 7) % a.vocab for t in range(prompt)] for r in range(gb)], device=dev)
        rates = []
        for i in range(3):  # i == 0: warm-up
            progress("decode", i + 1, 3, f"batch {gb}")
            caches = [(torch.empty(gb, a.heads, prompt + fresh, D, dtype=torch.bfloat16, device=dev),
                       torch.empty(gb, a.heads, prompt + fresh, D, dtype=torch.bfloat16, device=dev))
                      for _ in range(a.layers)]
            nxt = model(ids, caches, 0)[:, -1].argmax(-1, keepdim=True)  # prefill
            sync(dev)
            t0 = time.perf_counter()
            for s in range(fresh - 1):
                nxt = model(nxt, caches, prompt + s)[:, -1].argmax(-1, keepdim=True)
            sync(dev)
            if i > 0:
                rates.append(gb / ((time.perf_counter() - t0) / (fresh - 1)))
        tps = statistics.median(rates)
        print(f"torch decode batch {gb}: {tps:.0f} tokens/s")
        report[f"decode_batch{gb}"] = {"tokens_per_s": tps}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="bench_gpu --quick's model: 2 layers, d 256, context 256")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--layers", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = p.parse_args()
    if a.layers is not None and a.layers < 1 or a.batch is not None and a.batch < 1:
        p.error("--layers and --batch: accepted values are integers >= 1")
    # bench_gpu's shapes (bench/gpu/bench_gpu.cc: model_section)
    a.layers = a.layers or (2 if a.quick else 24)
    a.batch = a.batch or (4 if a.quick else 8)
    a.d_model, a.heads = (256, 4) if a.quick else (1024, 16)
    a.context, a.vocab = (256, 256) if a.quick else (1024, 50304)
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_anchor: torch sees no GPU", file=sys.stderr)
        return 2
    dev = torch.device(a.device)
    torch.manual_seed(1337)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # as libdtrain: bf16 GEMMs, f32 stays f32
    report = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
              "config": {"layers": a.layers, "d_model": a.d_model, "heads": a.heads, "context": a.context,
                         "vocab": a.vocab, "batch": a.batch}}
    model = train_section(a, dev, report)
    decode_section(a, dev, model, report)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
