#!/usr/bin/env python3
"""Loads a directory that `dtrain export` (or dt_module_save_hf) wrote with transformers and
checks that it loads without a warning and gives the logits libdtrain gives.

    python3 tools/hf_fixtures/check_export.py EXPORTED_DIR [REFERENCE.safetensors]

REFERENCE holds "prompt_ids" and "prompt_logits" (the fixtures' reference.safetensors, or
what `dtrain generate --model EXPORTED_DIR --logits-json` would give); without it, only the
load is checked. Exit 0 when every check holds, 1 otherwise, 77 when transformers is not
installed (ctest reads that as skipped). Needs torch and transformers (a venv from PyPI)."""
import io
import logging
import sys
import warnings

try:
    import torch
    import transformers
    from safetensors.torch import load_file
except ImportError as e:  # CI has no torch: the check is skipped, not failed
    print(f"check_export: skipped ({e})")
    sys.exit(77)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    transformers.logging.get_logger().addHandler(handler)
    transformers.logging.set_verbosity_warning()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    messages = [str(w.message) for w in caught] + [l for l in log.getvalue().splitlines() if l.strip()]
    ok = True
    if messages:
        ok = False
        print("check_export: transformers warned while loading:")
        for m in messages:
            print("   ", m)
    print(f"check_export: {path}: {type(model).__name__}, {sum(p.numel() for p in model.parameters())} parameters")
    if len(sys.argv) > 3 and sys.argv[2] == "--greedy":  # PROMPT_IDS GENERATED_IDS, comma lists
        prompt = torch.tensor([[int(x) for x in sys.argv[3].split(",")]])
        want = [int(x) for x in sys.argv[4].split(",")]
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=len(want), min_new_tokens=len(want), do_sample=False,
                                 pad_token_id=0, eos_token_id=None)
        got = out[0, prompt.shape[1]:].tolist()
        print(f"check_export: greedy tokens: transformers {got}, libdtrain {want}")
        ok = ok and got == want
    elif len(sys.argv) > 2:
        ref = load_file(sys.argv[2])
        with torch.no_grad():
            logits = model(ref["prompt_ids"].view(1, -1)).logits[0].float()
        want = ref["prompt_logits"]
        err = ((logits - want).abs().max() / want.abs().max()).item()
        print(f"check_export: logits vs reference: max |diff| / max |ref| = {err:.2e} (bound 1e-4)")
        ok = ok and err <= 1e-4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
