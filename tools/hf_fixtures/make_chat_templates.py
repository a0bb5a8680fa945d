#!/usr/bin/env python3
"""Makes the chat template fixtures: tests/fixtures/hf/chat_templates.json and one
tokenizer_config.json per family under tests/fixtures/hf/chat/<family>/.

Run by hand (never in CI) with PyPI's transformers, tokenizers and jinja2, e.g.
    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install transformers tokenizers jinja2
    /tmp/hfvenv/bin/python tools/hf_fixtures/make_chat_templates.py
Nothing is downloaded. The templates are our built-in families, read from
lib/io/chat_templates_builtin.inc (their one definition, which the C++ embeds): written by
us to reproduce each family's format, not copied from any model repository. For each
template and conversation this records what transformers' apply_chat_template(conv,
tokenize=False, add_generation_prompt=...) returns (or the message of the exception it
raises), and the assistant spans its return_assistant_tokens_mask machinery reads from
the {% generation %} blocks (as UTF-8 byte offsets). tests/unit/io_chat_template_test.cc
checks libdtrain's renders against them byte for byte.
"""
import json
import os
import re
import sys

import jinja2
import transformers
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILTIN_INC = os.path.join(ROOT, "lib", "io", "chat_templates_builtin.inc")
OUT_JSON = os.path.join(ROOT, "tests", "fixtures", "hf", "chat_templates.json")
CHAT_DIR = os.path.join(ROOT, "tests", "fixtures", "hf", "chat")
LLAMA2_TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "hf", "tokenizers", "llama2", "tokenizer.json")

# The special tokens each family's tokenizer sets (None: not set, so the template sees
# the name undefined, as with Qwen2's bos_token).
TOKENS = {
    "chatml": {"bos_token": None, "eos_token": "<|im_end|>"},
    "qwen2": {"bos_token": None, "eos_token": "<|im_end|>"},
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>"},
    "zephyr": {"bos_token": "<s>", "eos_token": "</s>"},
}

SYS = "  You are terse; answer in «one» line.\n"
U1 = 'Héllo, "wörld" — what\'s 2+2? 😀'
A1 = "  It's 4.\n\nAnything else?  "
U2 = "\tSay 'hi' in 日本語\n"
A2 = "こんにちは\u00a0(konnichiwa) \\o/"
U3 = "Thanks!  \n"
A3 = "Bye.\u3000"


def conv(*pairs):
    return [{"role": r, "content": c} for r, c in pairs]


CONVERSATIONS = {
    "1": conv(("user", U1)),
    "2": conv(("user", U1), ("assistant", A1)),
    "5": conv(("user", U1), ("assistant", A1), ("user", U2), ("assistant", A2), ("user", U3)),
    "sys+1": conv(("system", SYS), ("user", U1)),
    "sys+2": conv(("system", SYS), ("user", U1), ("assistant", A1)),
    "sys+5": conv(("system", SYS), ("user", U1), ("assistant", A1), ("user", U2), ("assistant", A2), ("user", U3)),
    "6": conv(("user", U1), ("assistant", A1), ("user", U2), ("assistant", A2), ("user", U3), ("assistant", A3)),
    "empty_contents": conv(("user", ""), ("assistant", "   \n"), ("user", " "), ("assistant", "")),
    # Raise in the templates that check roles.
    "not_alternating": conv(("user", U1), ("user", U2)),
    "system_late": conv(("user", U1), ("system", SYS)),
}

# Families whose tokenizer_config.json fixture drops the {% generation %} tags (the output is
# the same), so that loading it exercises the spans found without them.
STRIP_GENERATION = {"qwen2", "llama3", "llama2", "zephyr"}


def read_builtins():
    text = open(BUILTIN_INC, encoding="utf-8").read()
    found = re.findall(r'DT_CHAT_TEMPLATE\("([a-z0-9_]+)",\s*R"jinja\((.*?)\)jinja"\)', text, re.S)
    if not found:
        sys.exit(f"no DT_CHAT_TEMPLATE entries in {BUILTIN_INC}")
    return dict(found)


def strip_generation(src):
    return re.sub(r"\{%[-+]?\s*(end)?generation\s*[-+]?%\}", "", src)


def make_tokenizer(tokens):
    kwargs = {k: v for k, v in tokens.items() if v is not None}
    if os.path.exists(LLAMA2_TOKENIZER):
        return PreTrainedTokenizerFast(tokenizer_file=LLAMA2_TOKENIZER, **kwargs)
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
    t = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=t, **kwargs)


def byte_offset(text, index):
    return len(text[:index].encode("utf-8"))


def record(name, src, tokens):
    tok = make_tokenizer(tokens)
    tok.chat_template = src
    cases = []
    for conv_name, messages in CONVERSATIONS.items():
        for agp in (True, False):
            case = {"template": name, "conversation": conv_name, "add_generation_prompt": agp}
            try:
                case["expected"] = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=agp)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
                cases.append(case)
                continue
            # The stripped template (written to the config fixtures) renders the same.
            stripped = strip_generation(src)
            tok.chat_template = stripped
            assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=agp) == case["expected"]
            tok.chat_template = src
            if not agp:
                rendered, indices = render_jinja_template(
                    conversations=[messages], chat_template=src, return_assistant_tokens_mask=True,
                    add_generation_prompt=False, **tok.special_tokens_map)
                text = rendered[0]
                assert text == case["expected"]
                case["assistant_spans"] = [[byte_offset(text, b), byte_offset(text, e)] for b, e in indices[0]]
            cases.append(case)
    return cases


def added_token(content):
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False}


def write_configs(builtins):
    configs = {}
    for name, src in builtins.items():
        tokens = TOKENS[name]
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096, "clean_up_tokenization_spaces": False}
        # Plain strings for most; AddedToken dicts for the Llama families (as their configs
        # write them); null for an unset bos (as Qwen2's does).
        for key, value in tokens.items():
            if name in ("llama2", "llama3") and value is not None:
                cfg[key] = added_token(value)
            else:
                cfg[key] = value
        template = strip_generation(src) if name in STRIP_GENERATION else src
        files = {}
        if name == "mistral":
            # The list form, with the default first-but-not-only.
            cfg["chat_template"] = [{"name": "tool_use", "template": builtins["chatml"]},
                                    {"name": "default", "template": template}]
        elif name == "smollm2":
            # Newer transformers writes the template beside the config.
            files["chat_template.jinja"] = template
        else:
            cfg["chat_template"] = template
        d = os.path.join(CHAT_DIR, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=2)
            f.write("\n")
        for fname, text in files.items():
            with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
                f.write(text)
        configs[name] = {"path": os.path.relpath(os.path.join(d, "tokenizer_config.json"), ROOT),
                         "generation_tags": name not in STRIP_GENERATION}
    return configs


def main():
    builtins = read_builtins()
    missing = set(TOKENS) - set(builtins)
    if missing:
        sys.exit(f"no built-in template for {sorted(missing)}")
    out = {
        "about": "Made by tools/hf_fixtures/make_chat_templates.py; do not edit by hand.",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "templates": {n: {"source": builtins[n], **TOKENS[n]} for n in sorted(builtins)},
        "conversations": CONVERSATIONS,
        "cases": [],
    }
    for name in sorted(builtins):
        out["cases"] += record(name, builtins[name], TOKENS[name])
    out["configs"] = write_configs(builtins)
    os.makedirs(os.path.dirname(OUT_JSON), exist_ok=True)
    with open(OUT_JSON, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in out["cases"] if "error" in c)
    print(f"{OUT_JSON}: {len(out['cases'])} cases ({errors} raise), {os.path.getsize(OUT_JSON)} bytes")


if __name__ == "__main__":
    main()
