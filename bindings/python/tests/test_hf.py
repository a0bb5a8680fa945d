"""Hugging Face models and tokenizers through the binding: Model.from_hf / save_hf,
Engine.save_hf, hf_inspect, Tokenizer, Detokenizer; held to the fixtures' references
(transformers' greedy ids and chat templates, tokenizers' ids) and to the C API itself,
called through ctypes on the libdtrain the package carries."""
import array
import ctypes
import json
import os
import pathlib
import struct

import pytest

import dtrain

# test.sh copies the tests out of the tree and says where the fixtures are.
FIXTURES = pathlib.Path(os.environ.get("DTRAIN_FIXTURES")
                        or pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures") / "hf"
MODELS = FIXTURES / "models"
TOKENIZERS = FIXTURES / "tokenizers"
UNICODE = 'Héllo, "wörld" — what\'s 2+2? 😀 日本語 naïve\n\tcafé'
CONVERSATION = [{"role": "user", "content": 'Héllo, "wörld" — what\'s 2+2? 😀'},
                {"role": "assistant", "content": "  It's 4.\n\nAnything else?  "}]


def _reference(name):
    """The fixture's reference.safetensors: its integer tensors (prompt_ids, greedy_ids)."""
    data = (MODELS / name / "reference.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    out = {}
    for key, t in header.items():
        if key != "__metadata__" and t["dtype"] in ("I64", "I32"):
            start, end = t["data_offsets"]
            out[key] = list(array.array("q" if t["dtype"] == "I64" else "i", body[start:end]))
    return out


def _greedy(model, prompt, n):
    with dtrain.Optimizer(model, "sgd", lr=0.0) as opt, dtrain.Engine(None, model, opt) as engine:
        return engine.generate(prompt, max_new_tokens=n)


@pytest.fixture(scope="module")
def capi():
    """The C API of the very library the package loaded, for side-by-side checks."""
    lib = ctypes.CDLL(str(pathlib.Path(dtrain.__file__).parent / "libdtrain.so.0"))
    p, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.dt_tokenizer_create.argtypes = [ctypes.c_char_p, p, ctypes.POINTER(p)]
    lib.dt_tokenizer_destroy.argtypes = [p]
    lib.dt_tokenizer_encode.argtypes = [p, ctypes.c_char_p, sz, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), sz,
                                        ctypes.POINTER(sz)]
    lib.dt_tokenizer_apply_chat_template.argtypes = [p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p, sz,
                                                     ctypes.POINTER(sz)]
    for name in ("dt_options_create", "dt_options_destroy", "dt_options_set_string"):
        getattr(lib, name).argtypes = {"dt_options_create": [ctypes.POINTER(p)], "dt_options_destroy": [p],
                                       "dt_options_set_string": [p, ctypes.c_char_p, ctypes.c_char_p]}[name]
    return lib


def _c_tokenizer(lib, path, chat_template=None):
    opts = ctypes.c_void_p()
    if chat_template is not None:
        assert lib.dt_options_create(ctypes.byref(opts)) == 0
        assert lib.dt_options_set_string(opts, b"chat_template", chat_template.encode()) == 0
    tok = ctypes.c_void_p()
    assert lib.dt_tokenizer_create(str(path).encode(), opts, ctypes.byref(tok)) == 0
    lib.dt_options_destroy(opts)
    return tok


def _c_encode(lib, tok, text, special):
    data = text.encode()
    n = ctypes.c_size_t()
    assert lib.dt_tokenizer_encode(tok, data, len(data), int(special), None, 0, ctypes.byref(n)) == 0
    ids = (ctypes.c_int32 * max(n.value, 1))()
    assert lib.dt_tokenizer_encode(tok, data, len(data), int(special), ids, n.value, ctypes.byref(n)) == 0
    return list(ids[:n.value])


def _c_chat(lib, tok, messages, add_generation_prompt):
    doc = json.dumps(messages).encode()
    needed = ctypes.c_size_t()
    assert lib.dt_tokenizer_apply_chat_template(tok, doc, int(add_generation_prompt), None, 0,
                                                ctypes.byref(needed)) == 0
    buf = ctypes.create_string_buffer(needed.value)
    assert lib.dt_tokenizer_apply_chat_template(tok, doc, int(add_generation_prompt), buf, needed.value,
                                                ctypes.byref(needed)) == 0
    return buf.raw[:needed.value - 1].decode()


@pytest.mark.parametrize("name", ["qwen2", "llama"])
def test_from_hf_generates_the_reference_greedy_ids(name):
    ref = _reference(name)
    info = dtrain.hf_inspect(MODELS / name)
    assert info["architecture"] == {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}[name]
    with dtrain.Model.from_hf(MODELS / name) as model:
        assert model.param_count == info["parameters"] > 0
        n = len(ref["greedy_ids"])
        assert _greedy(model, ref["prompt_ids"], n) == ref["greedy_ids"]
    with dtrain.Model.from_hf(str(MODELS / name), precision="f32", context=32) as short:
        assert short.param_count == info["parameters"]


def test_save_hf_round_trip(tmp_path):
    ref = _reference("qwen2")
    with dtrain.Model.from_hf(MODELS / "qwen2") as model:
        model.save_hf(tmp_path / "module", tokenizer_from=TOKENIZERS / "qwen2", eos_token_ids=[7, 9])
        with dtrain.Optimizer(model, "sgd", lr=0.0) as opt, dtrain.Engine(None, model, opt) as engine:
            engine.save_hf(str(tmp_path / "engine"), precision="bf16")
        count = model.param_count
    assert (tmp_path / "module" / "tokenizer.json").is_file()
    assert dtrain.hf_inspect(tmp_path / "module")["eos_token_ids"] == [7, 9]
    assert dtrain.hf_inspect(tmp_path / "engine")["stored_dtype"] == "bf16"
    with dtrain.Model.from_hf(tmp_path / "module") as again:
        assert again.param_count == count
        assert _greedy(again, ref["prompt_ids"], len(ref["greedy_ids"])) == ref["greedy_ids"]
    with dtrain.Model.from_hf(tmp_path / "engine", precision="stored") as again:
        assert again.param_count == count
    with dtrain.Tokenizer(tmp_path / "module") as tok, dtrain.Tokenizer(TOKENIZERS / "qwen2" / "tokenizer.json") as want:
        assert tok.encode(UNICODE) == want.encode(UNICODE)


def test_stop_tokens_end_the_generation():
    ref = _reference("llama")
    stop = ref["greedy_ids"][2]
    with dtrain.Model.from_hf(MODELS / "llama") as model, dtrain.Optimizer(model, "sgd", lr=0.0) as opt, \
            dtrain.Engine(None, model, opt) as engine:
        got = engine.generate(ref["prompt_ids"], max_new_tokens=8, stop_tokens=[stop, 0])
        assert got == ref["greedy_ids"][:ref["greedy_ids"].index(stop) + 1]
        assert engine.generate(ref["prompt_ids"], max_new_tokens=8, stop_tokens=str(stop)) == got


@pytest.mark.parametrize("family", ["qwen2", "llama2"])
def test_tokenizer_round_trip_and_the_c_api(family, capi):
    path = TOKENIZERS / family / "tokenizer.json"
    with dtrain.Tokenizer(path) as tok:
        ids = tok.encode(UNICODE)
        assert all(isinstance(i, int) for i in ids) and len(ids) > 10
        assert tok.decode(ids) == UNICODE
        assert tok.decode(array.array("i", ids)) == UNICODE
        c = _c_tokenizer(capi, path)
        try:
            assert ids == _c_encode(capi, c, UNICODE, True)
            assert tok.encode(UNICODE, add_special_tokens=False) == _c_encode(capi, c, UNICODE, False)
        finally:
            capi.dt_tokenizer_destroy(c)
        assert tok.encode(UNICODE.encode("utf-8")) == ids  # bytes too
        assert tok.encode("", add_special_tokens=False) == [] and tok.decode([]) == ""
        assert tok.vocab_size == 512
        # What the tokenizers library gives (tests/fixtures/hf/tokenizers/<family>/cases.json).
        case = next(c for c in json.loads((TOKENIZERS / family / "cases.json").read_text())["cases"]
                    if c["text"] == "❤️✨😀")
        assert tok.encode(case["text"], add_special_tokens=False) == case["ids"]
        assert tok.encode(case["text"]) == case["ids_special"]
        assert tok.decode(case["ids_special"], skip_special_tokens=False) == case["decoded"]
        assert tok.decode(case["ids_special"]) == case["decoded_skip"]


def test_numpy_ids_both_ways():
    np = pytest.importorskip("numpy")
    with dtrain.Tokenizer(TOKENIZERS / "qwen2" / "tokenizer.json") as tok:
        ids = tok.encode_array(UNICODE)  # libdtrain wrote into the array
        assert ids.dtype == np.int32 and ids.tolist() == tok.encode(UNICODE)
        assert tok.decode(ids) == UNICODE  # read in place
        assert tok.decode(ids.astype(np.int64)) == UNICODE  # another dtype: converted
        assert tok.decode(ids[::2]) == tok.decode(ids.tolist()[::2])  # strided: copied


def test_special_tokens_and_info():
    with dtrain.Tokenizer(TOKENIZERS / "llama2" / "tokenizer.json") as tok:
        bos = tok.token_to_id("<s>")
        assert tok.encode("hi")[0] == bos and tok.encode("hi", add_special_tokens=False)[0] != bos
        info = tok.info
        assert {"id": bos, "content": "<s>"} in info["special"] and info["chat_template"] is False
        with pytest.raises(dtrain.NotFoundError, match="no-such-token"):
            tok.token_to_id("no-such-token")
        with pytest.raises(dtrain.NotFoundError, match="chat_template"):
            tok.apply_chat_template(CONVERSATION)
        with pytest.raises(dtrain.InvalidArgumentError):
            tok.decode([tok.vocab_size])


def test_apply_chat_template_equals_transformers_and_the_c_api(capi):
    cases = json.loads((FIXTURES / "chat_templates.json").read_text())
    assert cases["conversations"]["2"] == CONVERSATION
    path = TOKENIZERS / "qwen2" / "tokenizer.json"
    c = _c_tokenizer(capi, path, "chatml")
    try:
        with dtrain.Tokenizer(path, chat_template="chatml") as tok:
            assert tok.info["chat_template"] is True
            for gen in (True, False):
                want = next(k["expected"] for k in cases["cases"] if k["template"] == "chatml"
                            and k["conversation"] == "2" and k["add_generation_prompt"] == gen)
                got = tok.apply_chat_template(CONVERSATION, add_generation_prompt=gen)
                assert got == want == _c_chat(capi, c, CONVERSATION, gen)
            with pytest.raises(dtrain.InvalidArgumentError, match="role"):
                tok.apply_chat_template([{"role": 1, "content": "x"}])
    finally:
        capi.dt_tokenizer_destroy(c)
    with pytest.raises(dtrain.InvalidArgumentError, match="alternate"):
        with dtrain.Tokenizer(TOKENIZERS / "llama2" / "tokenizer.json", chat_template="llama2") as tok:
            tok.apply_chat_template(cases["conversations"]["not_alternating"])


def test_a_model_directorys_tokenizer(capi):
    """A model directory: tokenizer.json with tokenizer_config.json (special tokens, chat
    template) and generation_config.json (the end ids)."""
    cases = json.loads((FIXTURES / "chat_templates.json").read_text())
    with dtrain.Tokenizer(MODELS / "llama", chat_template="llama2") as tok:
        info = tok.info
        assert (info["bos_token"], info["bos_token_id"], info["eos_token_ids"]) == ("<s>", 1, [2])
        for gen in (True, False):
            want = next(k["expected"] for k in cases["cases"] if k["template"] == "llama2"
                        and k["conversation"] == "2" and k["add_generation_prompt"] == gen)
            assert tok.apply_chat_template(CONVERSATION, add_generation_prompt=gen) == want
    with dtrain.Tokenizer(MODELS / "qwen2") as tok:
        info = tok.info
        assert info["chat_template"] is True and info["eos_token_ids"] == [511]
        text = tok.apply_chat_template(CONVERSATION)  # the directory's own template
        c = _c_tokenizer(capi, MODELS / "qwen2")
        try:
            assert text == _c_chat(capi, c, CONVERSATION, True)
        finally:
            capi.dt_tokenizer_destroy(c)
        assert text.endswith("<|im_start|>assistant\n") and CONVERSATION[1]["content"] in text
        # Text in, generation, text out: the model and its tokenizer together.
        with dtrain.Model.from_hf(MODELS / "qwen2") as model:
            ids = tok.encode(text, add_special_tokens=False)
            new = _greedy(model, ids, 6)
        assert len(new) == 6 and "".join(tok.detokenize(new)) == tok.decode(new)


@pytest.mark.parametrize("family", ["qwen2", "llama2"])
def test_detokenizer_pieces_concatenate_to_decode(family):
    with dtrain.Tokenizer(TOKENIZERS / family / "tokenizer.json") as tok:
        ids = tok.encode(UNICODE)
        pieces = list(tok.detokenize(iter(ids)))
        assert len(pieces) > 1 and "".join(pieces) == tok.decode(ids) == UNICODE
        special = "".join(tok.detokenize(ids, skip_special_tokens=False))
        assert special == tok.decode(ids, skip_special_tokens=False)
        with tok.detokenizer() as d:
            text = "".join(d.push(i) for i in ids) + d.finish()
            assert text == UNICODE
            with pytest.raises(dtrain.InvalidArgumentError, match="finish"):
                d.push(ids[0])
        d = dtrain.Detokenizer(tok)
    with pytest.raises(dtrain.InvalidArgumentError):
        d.push(10**6)
    d.push(ids[0])  # the tokenizer's handle is closed: the detokenizer keeps what it needs
    d.close()
    d.close()
    with pytest.raises(ValueError, match="closed"):
        d.push(1)


def test_detokenize_a_stream_left_early_stops_it():
    ref = _reference("qwen2")
    with dtrain.Model.from_hf(MODELS / "qwen2") as model, dtrain.Optimizer(model, "sgd", lr=0.0) as opt, \
            dtrain.Engine(None, model, opt) as engine, \
            dtrain.Tokenizer(TOKENIZERS / "qwen2" / "tokenizer.json") as tok:
        whole = "".join(tok.detokenize(engine.stream(ref["prompt_ids"], max_new_tokens=8)))
        assert whole == tok.decode(ref["greedy_ids"])
        pieces = tok.detokenize(engine.stream(ref["prompt_ids"], max_new_tokens=60))
        next(pieces)
        pieces.close()  # closes the stream too: the engine is free again at once
        assert engine.generate(ref["prompt_ids"], max_new_tokens=8) == ref["greedy_ids"]


def test_missing_directory_is_io_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-model"
    for call in (lambda: dtrain.Model.from_hf(missing), lambda: dtrain.hf_inspect(missing),
                 lambda: dtrain.Tokenizer(missing)):
        with pytest.raises(dtrain.DtrainIOError) as info:
            call()
        assert info.value.status == 5 and isinstance(info.value, OSError)
        assert str(missing) in info.value.message
    with pytest.raises(dtrain.InvalidArgumentError, match="precision"):
        dtrain.Model.from_hf(MODELS / "qwen2", precision="f8")
    with pytest.raises(TypeError):
        dtrain.Tokenizer(TOKENIZERS / "qwen2" / "tokenizer.json").encode(42)  # type: ignore[arg-type]
