#!/usr/bin/env python3
"""Makes the tiny Hugging Face model fixtures under tests/fixtures/hf/models/.

Run by hand (never in CI) with PyPI's torch and transformers, e.g.
    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers tokenizers jinja2
    /tmp/hfvenv/bin/python tools/hf_fixtures/make_models.py
Nothing comes from a model hub: every model is random, from a config written here. Each
directory is what `save_pretrained` writes (config.json, generation_config.json, one
model.safetensors or shards with model.safetensors.index.json), plus the family's tokenizer
files when tools/hf_fixtures/make_tokenizers.py and make_chat_templates.py have made them,
and reference.safetensors: the logits transformers computes in float32 for a fixed prompt
(prompt_ids, prompt_logits [T, V]) and for greedy decoding with its KV cache
(greedy_ids, greedy_logits [N, V]), which tests/unit/io_hf_model_test.cc compares with.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "hf", "models")
TOK = os.path.join(ROOT, "tests", "fixtures", "hf", "tokenizers")
CHAT = os.path.join(ROOT, "tests", "fixtures", "hf", "chat")
VOCAB = 512
PROMPT_LEN = 12
NEW_TOKENS = 8


def spec():
    T = transformers
    return [
        # name, config, stored dtype, max shard size (None: one file), tokenizer family, chat family
        ("gpt2", T.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                              activation_function="gelu_new", layer_norm_epsilon=1e-5,
                              bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1),
         torch.float32, None, "gpt2", None),
        ("llama", T.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                rms_norm_eps=1e-6, rope_theta=10000.0,
                                rope_scaling={"rope_type": "linear", "factor": 2.0},
                                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
         torch.float32, None, "llama2", "llama2"),
        ("llama3", T.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128,
                                 rms_norm_eps=1e-5, rope_theta=500000.0,
                                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
                                 tie_word_embeddings=True, bos_token_id=VOCAB - 5, eos_token_id=[VOCAB - 4, VOCAB - 1]),
         torch.bfloat16, None, "llama3", "llama3"),
        ("qwen2", T.Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                                use_sliding_window=False, bos_token_id=VOCAB - 3, eos_token_id=VOCAB - 1),
         torch.float32, None, "qwen2", "qwen2"),
        ("mistral", T.MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                    rms_norm_eps=1e-5, rope_theta=10000.0, sliding_window=128,
                                    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
         torch.float16, "60KB", "mistral", "mistral"),
        ("mixtral", T.MixtralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                    rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None,
                                    num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.02,
                                    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
         torch.float32, None, "mistral", "mistral"),
        # Qwen2-MoE: every layer sparse, a shared expert with its sigmoid gate, top-k not renormalised.
        ("qwen2_moe", T.Qwen2MoeConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                       rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
                                       use_sliding_window=False, decoder_sparse_step=1, num_experts=4,
                                       num_experts_per_tok=2, moe_intermediate_size=48,
                                       shared_expert_intermediate_size=96, norm_topk_prob=False,
                                       router_aux_loss_coef=0.001, bos_token_id=VOCAB - 3, eos_token_id=VOCAB - 1),
         torch.float32, None, "qwen2", "qwen2"),
    ]


def model_class(cfg):
    return getattr(transformers, cfg.architectures[0]) if cfg.architectures else {
        "gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
        "qwen2": transformers.Qwen2ForCausalLM, "mistral": transformers.MistralForCausalLM,
        "mixtral": transformers.MixtralForCausalLM,
        "qwen2_moe": transformers.Qwen2MoeForCausalLM}[cfg.model_type]


def reference(path, seed):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(3, VOCAB - 8, (1, PROMPT_LEN), generator=g)
    with torch.no_grad():
        logits = model(prompt).logits[0].float()
        out = model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
    greedy = out.sequences[0, PROMPT_LEN:]
    return {"prompt_ids": prompt[0].to(torch.int64).contiguous(), "prompt_logits": logits.contiguous(),
            "greedy_ids": greedy.to(torch.int64).contiguous(),
            "greedy_logits": torch.stack([l[0].float() for l in out.logits]).contiguous()}


def copy_if_there(src_dir, names, dst):
    for n in names:
        p = os.path.join(src_dir, n)
        if os.path.isfile(p):
            shutil.copy(p, os.path.join(dst, n))


def v4_style_rope(path):
    """Rewrites config.json's rope settings as transformers 4.x wrote them (rope_theta and
    rope_scaling beside each other): most checkpoints in use have this form, so one fixture
    keeps it (the others have 5.x's rope_parameters)."""
    p = os.path.join(path, "config.json")
    cfg = json.load(open(p))
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope
    json.dump(cfg, open(p, "w"), indent=2, sort_keys=True)


def main():
    torch.manual_seed(0)
    only = set(sys.argv[1:])
    for i, (name, cfg, dtype, shard, tok, chat) in enumerate(spec()):
        if only and name not in only:
            continue
        path = os.path.join(OUT, name)
        shutil.rmtree(path, ignore_errors=True)
        torch.manual_seed(100 + i)
        cls = {"GPT2Config": transformers.GPT2LMHeadModel, "LlamaConfig": transformers.LlamaForCausalLM,
               "Qwen2Config": transformers.Qwen2ForCausalLM,
               "MistralConfig": transformers.MistralForCausalLM,
               "MixtralConfig": transformers.MixtralForCausalLM,
               "Qwen2MoeConfig": transformers.Qwen2MoeForCausalLM}[type(cfg).__name__]
        model = cls(cfg)
        with torch.no_grad():  # larger than the default init, so the logits are far from uniform
            for pname, p in model.named_parameters():
                if p.dim() == 1 and ("norm" in pname or ".ln_" in pname):
                    p.copy_(1.0 + torch.randn_like(p) * 0.1)
                elif p.dim() == 1:
                    p.normal_(0.0, 0.05)
                else:
                    p.normal_(0.0, 0.08)
        model = model.to(dtype)
        kwargs = {"max_shard_size": shard} if shard else {}
        model.save_pretrained(path, **kwargs)
        if name == "llama":
            v4_style_rope(path)
        copy_if_there(os.path.join(TOK, tok), ["tokenizer.json"], path)
        if chat:
            copy_if_there(os.path.join(CHAT, chat), ["tokenizer_config.json"], path)
        save_file(reference(path, 1000 + i), os.path.join(path, "reference.safetensors"))
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        print(f"{name}: {cfg.architectures or type(cfg).__name__} {dtype} -> {path} ({size} bytes)")


if __name__ == "__main__":
    main()
