#!/usr/bin/env python3
"""Makes the Hugging Face tokenizer fixtures under tests/fixtures/hf/tokenizers/.

Run by hand (never in CI) with PyPI's `tokenizers`, e.g.
    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install tokenizers
    /tmp/hfvenv/bin/python tools/hf_fixtures/make_tokenizers.py
Nothing comes from a model hub and no text is copied from anywhere: every tokenizer is
trained here, by `tokenizers` itself, on a synthetic corpus that the generator below makes
from tests/fixtures/hf/tokenizers/fragments.json. Five families, 512 tokens each (specials
included), shaped like the real ones:
  gpt2     byte-level BPE, GPT-2's split regex, merges as "a b" strings, <|endoftext|> = 511
  llama3   byte-level BPE, Split(Llama-3 regex) + ByteLevel, ignore_merges, merges as pairs,
           five specials 507..511 (added tokens outside the model vocab), BOS template
  qwen2    byte-level BPE, NFC, Split(Qwen2 regex) + ByteLevel, three specials 509..511
  llama2   SentencePiece-style BPE with byte_fallback, Prepend + Replace normalizers, no
           pre-tokenizer, Replace/ByteFallback/Fuse/Strip decoder, <unk> <s> </s> = 0 1 2, BOS template
  mistral  SentencePiece-style BPE with byte_fallback, Metaspace(first, split false)
           pre-tokenizer, ByteFallback + Metaspace decoder, <unk> <s> </s> [INST] [/INST] = 0..4
Each family gets tokenizer.json and cases.json: short strings with the ids `tokenizers`
gives (with and without special tokens) and its decodes, invalid UTF-8 inputs (base64) with
the ids of their errors='replace' strings, and for 1 MB of generated text (64 chunks of at
least 16 kB, each encoded alone) the FNV-1a hash of each chunk's ids and the token count.
The C++ test (tests/unit/io_hf_tokenizer_test.cc) regenerates the same text; when a chunk
differs, `make_tokenizers.py --chunk FAMILY N` prints the reference ids of chunk N.
"""
import base64
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "hf", "tokenizers")
VOCAB = 512
MASK = (1 << 64) - 1
TEXT_SEED = 20260101        # the 1 MB comparison text
TEXT_CHUNKS = 64
CHUNK_BYTES = 16384
CORPUS_SEED = 7             # the training corpus (a different stream)

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- the text generator (the C++ test has the same one: keep them identical)
class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def load_fragments():
    with open(os.path.join(OUT, "fragments.json"), encoding="utf-8") as f:
        return json.load(f)["categories"]


def fragment(rng, cats):
    total = sum(c["weight"] for c in cats)
    r = rng.next() % total
    for c in cats:
        if r < c["weight"]:
            break
        r -= c["weight"]
    items = c["items"]
    if c["name"] == "word":
        n = 1 + rng.next() % 3
        w = "".join(items[rng.next() % len(items)] for _ in range(n))
        case = rng.next() % 8
        if case == 0:
            w = w.upper()
        elif case <= 2:
            w = w[0].upper() + w[1:]
        return " " + w
    return items[rng.next() % len(items)]


def chunk(rng, cats, min_bytes):
    parts, n = [], 0
    while n < min_bytes:
        f = fragment(rng, cats)
        parts.append(f)
        n += len(f.encode("utf-8"))
    return "".join(parts)


def fnv1a_ids(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & MASK
    return h


# ---- training
def corpus(cats):
    rng = SplitMix64(CORPUS_SEED)
    return [chunk(rng, cats, 600) for _ in range(1500)]


def added(id_, content):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def byte_level(name, regex, specials, text):
    """Trains a byte-level BPE of VOCAB - len(specials) tokens and returns its JSON dict with
    the specials appended at the end (ids VOCAB - len(specials) ..)."""
    tok = Tokenizer(models.BPE())
    if regex is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    if name == "qwen2":
        tok.normalizer = normalizers.NFC()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(specials), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, trainer)
    d = json.loads(tok.to_str())
    assert len(d["model"]["vocab"]) == VOCAB - len(specials), len(d["model"]["vocab"])
    base = VOCAB - len(specials)
    d["added_tokens"] = [added(base + i, s) for i, s in enumerate(specials)]
    return d


def sentencepiece_like(specials, text):
    """A SentencePiece-style BPE: specials first, then the 256 <0xNN> byte tokens, then what
    the trainer learnt (its alphabet, limited, and merges), VOCAB tokens in all."""
    n_learnt = VOCAB - len(specials) - 256
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=n_learnt, limit_alphabet=70, show_progress=False)
    tok.train_from_iterator(text, trainer)
    learnt = json.loads(tok.to_str())["model"]
    assert len(learnt["vocab"]) == n_learnt, len(learnt["vocab"])
    vocab = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for s, _ in sorted(learnt["vocab"].items(), key=lambda kv: kv[1]):
        vocab[s] = len(vocab)
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
             "vocab": vocab, "merges": learnt["merges"]}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(i, s) for i, s in enumerate(specials)],
            "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None, "model": model}


def bos_template(bos, bos_id):
    t = processors.TemplateProcessing(single=bos + " $A", pair=bos + " $A " + bos + " $B:1",
                                      special_tokens=[(bos, bos_id)])
    return json.loads(t.__getstate__())


def build(name, cats, text):
    sp_replace = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}
    if name == "gpt2":
        d = byte_level(name, None, ["<|endoftext|>"], text)
        d["model"]["vocab"]["<|endoftext|>"] = VOCAB - 1   # in the model vocab too, as GPT-2's is
        d["added_tokens"][0]["normalized"] = True            # as GPT-2's (matched after normalization)
        d["model"]["merges"] = [a + " " + b for a, b in d["model"]["merges"]]
        d["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                               "use_regex": True}
    elif name == "llama3":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
        d = byte_level(name, LLAMA3_RE, specials, text)
        d["model"]["ignore_merges"] = True
        d["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            bos_template("<|begin_of_text|>", VOCAB - 5)]}
    elif name == "qwen2":
        d = byte_level(name, QWEN2_RE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], text)
        d["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                               "use_regex": False}
    elif name == "llama2":
        d = sentencepiece_like(["<unk>", "<s>", "</s>"], text)
        d["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        d["decoder"] = {"type": "Sequence", "decoders": [
            sp_replace, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
        d["post_processor"] = bos_template("<s>", 1)
    elif name == "mistral":
        d = sentencepiece_like(["<unk>", "<s>", "</s>", "[INST]", "[/INST]"], text)
        meta = {"replacement": "\u2581", "prepend_scheme": "first", "split": False}
        d["pre_tokenizer"] = dict({"type": "Metaspace"}, **meta)
        # Metaspace alone would print byte-fallback tokens as "<0xE4>"; ByteFallback first
        # turns them back into text, so decode(encode(x)) == x holds as for the others.
        d["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, dict({"type": "Metaspace"}, **meta)]}
        d["post_processor"] = bos_template("<s>", 1)
    else:
        raise ValueError(name)
    s = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
    tok = Tokenizer.from_str(s)
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB, (name, tok.get_vocab_size(True))
    return s, tok


# ---- the cases
HANDWRITTEN = [
    "", " ", "  ", "\n", "\r\n", "\t", "a", "A", "Hello world", " Hello world", "Hello  world ", "hello\nworld",
    "Hello, World! How are you?", "I'm here, you're there; they'll see. We'd've", "DON'T SHOUT'S 'LL",
    "it's 'tis o'clock", "12345678901234567890", "3.14159 2.71828", "1,000,000.00 -42 +7",
    "a  b   c    d", "trailing spaces   ", "   leading spaces", "tabs\tand\tmore\t\t", "line1\n\nline3\n",
    "windows\r\nlines\r\n", "mixed \n \t \r\n end", "caf\u00e9 cafe\u0301", "na\u00efve na\u0131ve", "Stra\u00dfe STRASSE",
    "\u00c5ngstr\u00f6m \u212b A\u030a", "\u1100\u1161\u11a8 \uac01", "\ufb01 \ufb02 \u01c5", "\u0130stanbul \u0131",
    "\u4e2d\u6587\u5b57\u7b26\u4e32", "\u65e5\u672c\u8a9e\u3068English\u306e\u6df7\u5728", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F1EB\U0001F1F7",
    "\u2764\ufe0f\u2728\U0001F600", "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "\u00a0nbsp\u00a0", "ideographic\u3000space", "em\u2003space", "zero\u200bwidth", "nel\u0085line",
    "line\u2028sep", "para\u2029sep", "mongolian\u180evowel", "narrow\u202fnbsp", "ogham\u1680space",
    "bom\ufeffinside", "ctrl\x00\x01\x1f\x7f", "bell\x07", "\u0661\u0662\u0663 \u0664\u0665", "\uff14\uff15\uff16",
    "\u00bd \u2153 \u00b2", "\u2160\u2161\u2162", "x\u0301\u0302\u0303\u0304", "\u0301leading mark",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababab", "the the the the the",
    "def f(x):\n    return x + 1\n", "int main() { printf(\"%d\\n\", 42); }", "{\"key\": [1, 2, {\"k\": null}]}",
    "a[i] += b[j] * c;", "<div class=\"a\">text</div>", "https://example.com/path?q=1&r=2#frag",
    "user@example.com", "C:\\\\Windows\\\\path", "$HOME/bin:/usr/bin", "snake_case camelCase PascalCase",
    "'s", "'", "''", "' s", "'S'T'RE", "x's y't z're", "?!...", "\u2014\u2013-", "\u2026", "!!!???",
    "<|endoftext|>", "hello<|endoftext|>world", "a <|endoftext|> b", "<|endoftext|><|endoftext|>",
    "<|endof", "endoftext|>", "<|begin_of_text|>hi", "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|im_start|>user\nhello<|im_end|>\n", "<s>hi</s>", "<s> hi </s>", "x<s>y", "</s>", "<unk>",
    "[INST] what? [/INST] answer", "[INST]tight[/INST]", " [INST] lead", "<0x41>", "\u2581", "\u2581\u2581x",
    "\u2581leading meta", "Ġ", "ĠĠ", "\u0100\u0101",
]


def cases(tok, cats):
    rng = SplitMix64(99)
    texts = list(HANDWRITTEN)
    for _ in range(220):
        n = 1 + rng.next() % 6
        texts.append("".join(fragment(rng, cats) for _ in range(n)))
    out = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        ids_sp = tok.encode(t, add_special_tokens=True).ids
        dec = tok.decode(ids_sp, skip_special_tokens=False)
        out.append({"text": t, "ids": ids, "ids_special": ids_sp, "decoded": dec,
                    "decoded_skip": tok.decode(ids_sp, skip_special_tokens=True),
                    "roundtrip": tok.decode(ids, skip_special_tokens=False) == t})
    return out


INVALID = [b"\xff", b"abc\xe4\xb8", b"\xe4\xb8\xad\xe4", b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong",
           b"\xf4\x90\x80\x80 too big", b"\x80\x80 lone continuations", b"ok \xf0\x9f\x98 cut emoji",
           b"\xe0\x80\x80", b"\xf0\x80\x80\x80", b"mixed \xc3\xa9\xc3 end", b"\xfe\xfe\xff", b"\xc2",
           b"a\xe2\x82b", b"\xf1\x80\x80\xe1\x80\xc2", b"x\xdf\xdf\xdfy"]


def invalid_cases(tok):
    out = []
    for b in INVALID:
        s = b.decode("utf-8", errors="replace")
        out.append({"bytes_b64": base64.b64encode(b).decode("ascii"), "replaced": s,
                    "ids": tok.encode(s, add_special_tokens=False).ids,
                    "ids_special": tok.encode(s, add_special_tokens=True).ids})
    return out


CHECKPOINT = 1024  # tokens between the prefix hashes that narrow a mismatch down


def big_chunks(cats):
    rng = SplitMix64(TEXT_SEED)
    return [chunk(rng, cats, CHUNK_BYTES) for _ in range(TEXT_CHUNKS)]


def big_text(tok, cats):
    hashes, counts, checkpoints, roundtrip = [], [], [], True
    for c in big_chunks(cats):
        ids = tok.encode(c, add_special_tokens=False).ids
        hashes.append("%016x" % fnv1a_ids(ids))
        counts.append(len(ids))
        checkpoints.append(["%016x" % fnv1a_ids(ids[:k]) for k in range(CHECKPOINT, len(ids) + 1, CHECKPOINT)])
        roundtrip = roundtrip and tok.decode(ids) == c
    return {"seed": TEXT_SEED, "chunks": TEXT_CHUNKS, "chunk_bytes": CHUNK_BYTES, "chunk_hashes": hashes,
            "chunk_tokens": counts, "total_tokens": sum(counts), "checkpoint": CHECKPOINT,
            "chunk_checkpoints": checkpoints, "roundtrip": roundtrip}


def main():
    import sys
    import tokenizers
    cats = load_fragments()
    if len(sys.argv) == 4 and sys.argv[1] == "--chunk":
        # Debugging a mismatch the C++ test reports: the reference ids of one chunk.
        tok = Tokenizer.from_file(os.path.join(OUT, sys.argv[2], "tokenizer.json"))
        c = big_chunks(cats)[int(sys.argv[3])]
        print(json.dumps([[i, tok.id_to_token(i)] for i in tok.encode(c, add_special_tokens=False).ids],
                         ensure_ascii=False))
        return
    text = corpus(cats)
    for name in ["gpt2", "llama3", "qwen2", "llama2", "mistral"]:
        s, tok = build(name, cats, text)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(s)
        ref = {"family": name, "tokenizers_version": tokenizers.__version__, "cases": cases(tok, cats),
               "invalid_utf8": invalid_cases(tok), "text_1mb": big_text(tok, cats)}
        with open(os.path.join(d, "cases.json"), "w", encoding="utf-8") as f:
            json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print("%-8s tokenizer.json %6d bytes, cases.json %6d bytes, 1 MB text: %d tokens" % (
            name, len(s.encode("utf-8")), os.path.getsize(os.path.join(d, "cases.json")),
            ref["text_1mb"]["total_tokens"]))


if __name__ == "__main__":
    main()
