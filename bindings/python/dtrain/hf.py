"""Hugging Face model directories and tokenizers: dtrain.hf_inspect, dtrain.Tokenizer and
dtrain.Detokenizer (Model.from_hf, Model.save_hf and Engine.save_hf are on those classes).

    with dtrain.Tokenizer("models/qwen2") as tok, dtrain.Model.from_hf("models/qwen2") as model, \
            dtrain.Optimizer(model) as opt, dtrain.Engine(None, model, opt) as engine:
        prompt = tok.apply_chat_template([{"role": "user", "content": "Hi!"}])
        ids = tok.encode(prompt, add_special_tokens=False)  # the template holds its specials
        for piece in tok.detokenize(engine.stream(ids, max_new_tokens=32,
                                                  stop_tokens=tok.info["eos_token_ids"])):
            print(piece, end="", flush=True)        # text as soon as it is final
"""
from __future__ import annotations

import array
import contextlib
import json
import os
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import native
from ._handle import Handle, handle_of, options_ptr
from ._json import read_json, read_text
from .model import PathLike

Text = Union[str, bytes, bytearray, memoryview]


def hf_inspect(dir: PathLike) -> Dict[str, Any]:
    """Describes a Hugging Face model directory without loading its weights: a dict with
    "architecture", "config" (dtrain.GPT keys), "parameters", "stored_dtype",
    "weight_bytes", "files", "bos_token_id", "eos_token_ids", "max_position_embeddings".
    Errors as Model.from_hf (DtrainIOError naming the file for a missing directory)."""
    path = os.fspath(dir)
    return read_json(lambda buf: native.dt_hf_inspect_json(path, buf))


def _utf8(text: Text) -> Union[bytes, bytearray, memoryview]:
    """The UTF-8 bytes the library reads (a str is encoded; bytes-like objects pass as they
    are, and their invalid sequences read as U+FFFD)."""
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")  # a lone surrogate: invalid, so U+FFFD
    if isinstance(text, (bytes, bytearray, memoryview)):
        return text
    raise TypeError("text must be str or bytes, not %s" % type(text).__name__)


def _ids(ids: Iterable[int]) -> Any:
    """Token ids as an int32 buffer: a 1-d C-contiguous int32 buffer (array.array("i"), an
    int32 numpy array) as it is, anything else copied (OverflowError outside int32)."""
    try:
        view = memoryview(ids)  # type: ignore[arg-type]
    except TypeError:
        view = None
    if view is not None and view.format == "i" and view.itemsize == 4 and view.ndim == 1 and view.c_contiguous:
        return view
    return array.array("i", [int(i) for i in ids])


class Tokenizer(Handle):
    """Tokenizer(path, chat_template=None): a Hugging Face tokenizer (dt_tokenizer). path: a
    model directory (its tokenizer.json, and if present tokenizer_config.json with the chat
    template and generation_config.json with the end-of-sequence ids) or a tokenizer.json
    file. chat_template: a built-in family instead of the file's ("chatml", "llama3",
    "llama2", "mistral", "zephyr"). What libdtrain does not implement exactly is refused by
    name (InvalidArgumentError); a malformed file is DtrainIOError. Immutable: any number
    of threads may use one at once (the GIL is released during each call)."""

    _destroy = staticmethod(native.dt_tokenizer_destroy)

    def __init__(self, path: PathLike, chat_template: Optional[str] = None) -> None:
        with contextlib.ExitStack() as stack:
            opts = options_ptr(None if chat_template is None else {"chat_template": chat_template}, stack)
            super().__init__(native.dt_tokenizer_create(os.fspath(path), opts))

    def _encode_into(self, data: Any, add_special_tokens: bool, make: Any) -> Any:
        """Encodes into a buffer that make(n) gives, sized by a first guess and, if the ids
        did not fit, once more at their exact count. Returns (buffer, count)."""
        h = self._h
        capacity = len(data) + 8  # a byte-level BPE makes at most one id per byte
        out = make(capacity)
        n = native.dt_tokenizer_encode(h, data, int(bool(add_special_tokens)), out)
        if n > capacity:
            out = make(n)
            n = native.dt_tokenizer_encode(h, data, int(bool(add_special_tokens)), out)
        return out, n

    def encode(self, text: Text, add_special_tokens: bool = True) -> List[int]:
        """The token ids of `text` (str, or UTF-8 bytes). add_special_tokens: the
        post-processor's tokens too (Llama's BOS), as transformers' encode does."""
        out, n = self._encode_into(_utf8(text), add_special_tokens, lambda k: array.array("i", bytes(4 * k)))
        return out[:n].tolist()

    def encode_array(self, text: Text, add_special_tokens: bool = True) -> Any:
        """encode() as an int32 numpy array that libdtrain wrote directly (no list, no copy)."""
        import numpy as np
        out, n = self._encode_into(_utf8(text), add_special_tokens, lambda k: np.empty(k, dtype=np.int32))
        return out[:n]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """The text of `ids` (a list, an int32 array, ...); skip_special_tokens leaves special
        tokens out. InvalidArgumentError for an id outside the vocabulary."""
        h, buf_ids = self._h, _ids(ids)
        skip = int(bool(skip_special_tokens))
        return read_text(lambda buf: native.dt_tokenizer_decode(h, buf_ids, skip, buf), errors="replace")

    @property
    def vocab_size(self) -> int:
        """The largest id + 1."""
        return native.dt_tokenizer_vocab_size(self._h)

    def token_to_id(self, token: str) -> int:
        """The id of a token's text (e.g. "<|im_end|>"); NotFoundError (a LookupError) if none."""
        return native.dt_tokenizer_token_to_id(self._h, token)

    @property
    def info(self) -> Dict[str, Any]:
        """The special tokens: {"bos_token", "eos_token", "bos_token_id", "eos_token_ids"
        (what generation stops at: pass them as stop_tokens), "vocab_size", "special":
        [{"id", "content"}, ...], "chat_template": bool}."""
        h = self._h
        return read_json(lambda buf: native.dt_tokenizer_info_json(h, buf))

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> str:
        """Renders a conversation, [{"role": "system" | "user" | "assistant", "content": ...},
        ...], with the chat template, byte for byte as transformers' apply_chat_template(
        messages, tokenize=False, add_generation_prompt=...). InvalidArgumentError carrying
        the template's message when it raises (roles that do not alternate, ...);
        NotFoundError when the tokenizer has no template (pass chat_template=)."""
        h = self._h
        doc = json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], ensure_ascii=False)
        gen = int(bool(add_generation_prompt))
        return read_text(lambda buf: native.dt_tokenizer_apply_chat_template(h, doc, gen, buf), errors="replace")

    def detokenizer(self, skip_special_tokens: bool = True) -> "Detokenizer":
        """A Detokenizer of this tokenizer (text out of ids pushed one at a time)."""
        return Detokenizer(self, skip_special_tokens)

    def detokenize(self, ids: Iterable[int], skip_special_tokens: bool = True) -> Iterator[str]:
        """A generator of text pieces for a stream of ids (such as engine.stream(...)): each
        piece as soon as it is final (never half a character), the rest when `ids` ends.
        The pieces concatenate to decode(all ids). Leaving the loop early closes the
        detokenizer, and `ids` too when it is a generator (engine.stream's: that stops the
        generation)."""
        it = iter(ids)
        with Detokenizer(self, skip_special_tokens) as d:
            try:
                for token in it:
                    piece = d.push(token)
                    if piece:
                        yield piece
            except GeneratorExit:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
                raise
            tail = d.finish()
            if tail:
                yield tail

    def __repr__(self) -> str:
        return "Tokenizer(closed)" if self.closed else "Tokenizer(vocab_size=%d)" % self.vocab_size


class Detokenizer(Handle):
    """Detokenizer(tokenizer, skip_special_tokens=True): streaming decode (dt_detokenizer).
    push(id) returns the text that became final (often "", never half a UTF-8 character;
    a SentencePiece leading space handled as a whole decode handles it), finish() the
    rest; the pieces concatenate to tokenizer.decode(ids). It keeps what it needs of the
    tokenizer alive, so the tokenizer may be closed first. One thread at a time."""

    _destroy = staticmethod(native.dt_detokenizer_destroy)

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> None:
        super().__init__(native.dt_detokenizer_create(handle_of(tokenizer, Tokenizer, "tokenizer"),
                                                      int(bool(skip_special_tokens))))

    def push(self, token: int) -> str:
        """Adds one id; returns the text made final by it ("" while it waits for more)."""
        native.dt_detokenizer_push(self._h, int(token))
        return self.text()

    def finish(self) -> str:
        """Ends the stream and returns what was held back (an incomplete UTF-8 tail as
        U+FFFD). Later pushes are InvalidArgumentError."""
        native.dt_detokenizer_finish(self._h)
        return self.text()

    def text(self) -> str:
        """The final text not yet returned (push and finish return it already)."""
        h = self._h
        return read_text(lambda buf: native.dt_detokenizer_text(h, buf), errors="replace")
