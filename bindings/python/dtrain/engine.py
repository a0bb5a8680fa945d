"""dtrain.Engine: training steps, evaluation, generation and checkpoints of a GPT.

    token = dtrain.CancelToken()          # token.cancel() from any thread stops the call
    loss = engine.train_step(x, y, cancel=token)
    for tok in engine.stream(b"123+456=", max_new_tokens=8):
        ...                               # leaving the loop cancels the generation
"""
from __future__ import annotations

import array
import contextlib
import numbers
import os
import queue
import threading
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from . import native
from ._handle import Handle, handle_of, options_ptr
from ._json import read_json
from .cancel import CancelToken, attached
from .errors import CancelledError
from .mesh import Mesh
from .model import Model, Optimizer, PathLike, hf_save_options
from .tensor import Tensor

Prompt = Union[str, bytes, Sequence[int]]
_END = object()  # what a stream's worker puts last


def _tokens(prompt: Any) -> List[int]:
    """A prompt as token ids: a str or bytes is its bytes (the byte tokenizer)."""
    if isinstance(prompt, str):
        prompt = prompt.encode("utf-8")
    return list(prompt)


def _is_single(prompts: Any) -> bool:
    """One prompt (str, bytes, or a list of ints) rather than a list of them."""
    return isinstance(prompts, (str, bytes)) or (len(prompts) > 0 and isinstance(prompts[0], numbers.Integral))


class Engine(Handle):
    """Engine(mesh, model, optimizer, **options): mesh None (this process alone) or a mesh
    whose axes above 1 are "dp" and "tp". options: micro_batches, max_grad_norm, schedule,
    warmup_steps, total_steps, min_lr_ratio, loss_scale_init, bucket_bytes, zero (0-3)."""

    _destroy = staticmethod(native.dt_engine_destroy)

    def __init__(self, mesh: Optional[Mesh], model: Model, optimizer: Optimizer, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_engine_create(
                handle_of(mesh, Mesh, "mesh", allow_none=True), handle_of(model, Model, "model"),
                handle_of(optimizer, Optimizer, "optimizer"), options_ptr(options, stack)))

    def train_step(self, inputs: Tensor, targets: Tensor, cancel: Optional[CancelToken] = None) -> float:
        """One optimizer step on i32 [B, T] tensors; returns the batch's mean loss (before
        the update). The GIL is released while it runs. cancel: a CancelToken whose
        cancel() (from another thread) makes it raise CancelledError, having changed
        nothing (no update, the same step count)."""
        x, y = handle_of(inputs, Tensor, "inputs"), handle_of(targets, Tensor, "targets")
        with attached(self._h, cancel):
            return native.dt_engine_train_step(self._h, x, y)

    def eval(self, inputs: Tensor, targets: Tensor, cancel: Optional[CancelToken] = None) -> float:
        """The batch's mean loss, changing nothing. cancel: as for train_step."""
        x, y = handle_of(inputs, Tensor, "inputs"), handle_of(targets, Tensor, "targets")
        with attached(self._h, cancel):
            return native.dt_engine_eval(self._h, x, y)

    @property
    def step(self) -> int:
        """Optimizer steps taken so far."""
        return native.dt_engine_step(self._h)

    def last_stats(self) -> Optional[dict]:
        """The last train step's metrics (dict), or None before any step."""
        return read_json(lambda buf: native.dt_engine_last_stats_json(self._h, buf))

    def last_generate_stats(self) -> Optional[dict]:
        return read_json(lambda buf: native.dt_engine_last_generate_stats_json(self._h, buf))

    def save(self, path_stem: str) -> None:
        native.dt_engine_save(self._h, path_stem)

    def load(self, path_stem: str) -> None:
        native.dt_engine_load(self._h, path_stem)

    def save_hf(self, dir: PathLike, precision: Optional[str] = None, architecture: Optional[str] = None,
                tokenizer_from: Optional[PathLike] = None, bos_token_id: Optional[int] = None,
                eos_token_id: Optional[int] = None, eos_token_ids: Optional[Union[str, Sequence[int]]] = None,
                max_shard_bytes: Optional[int] = None) -> None:
        """Model.save_hf of the engine's current weights, gathered first under tp, pp, dp or
        ZeRO (collective: under mpirun every process calls it; rank 0 writes)."""
        with contextlib.ExitStack() as stack:
            opts = options_ptr(hf_save_options(precision, architecture, tokenizer_from, bos_token_id, eos_token_id,
                                               eos_token_ids, max_shard_bytes), stack)
            native.dt_engine_save_hf(self._h, os.fspath(dir), opts)

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]], max_new_tokens: int = 16,
                 on_token: Optional[Callable[[int, int], Any]] = None, cancel: Optional[CancelToken] = None,
                 **options: Any) -> Any:
        """Continues each prompt (a list of token ids, or str/bytes as bytes). Returns a list
        of lists of new token ids; a single prompt (not in a list) returns one list.
        on_token(prompt_index, token), if given, is called with each token as it is made
        (its result is ignored; an exception it raises stops the generation and is raised
        here). cancel: a CancelToken; its cancel() makes this raise CancelledError.
        options: temperature, top_k, top_p, seed, stop_token, stop_tokens (a list of ids,
        such as Tokenizer.info["eos_token_ids"], or a string "3,7"): a prompt ends after
        emitting one of them."""
        stop = options.get("stop_tokens")
        if stop is not None and not isinstance(stop, str):
            options["stop_tokens"] = ",".join(str(int(t)) for t in stop)
        single = _is_single(prompts)
        rows = [_tokens(prompts)] if single else [_tokens(p) for p in prompts]
        if not rows or any(len(r) == 0 for r in rows):
            raise ValueError("prompts: at least one prompt, each of at least one token")
        flat = array.array("i", [t for r in rows for t in r])
        lengths = array.array("q", [len(r) for r in rows])
        cap = max(int(max_new_tokens), 1)
        out = array.array("i", bytes(4 * cap * len(rows)))
        out_lengths = array.array("q", bytes(8 * len(rows)))
        with contextlib.ExitStack() as stack:
            opts = options_ptr(dict(options, max_new_tokens=int(max_new_tokens)), stack)
            stack.enter_context(attached(self._h, cancel))
            if on_token is None:
                native.dt_engine_generate(self._h, flat, lengths, len(rows), opts, out, cap, out_lengths)
            else:
                def sink(i: int, token: int) -> bool:
                    on_token(i, token)
                    return False  # go on: stopping is cancel's (or an exception's) job
                native.dt_engine_generate_stream_v2(self._h, flat, lengths, len(rows), opts, sink, out, cap,
                                                    out_lengths)
        result = [out[i * cap:i * cap + out_lengths[i]].tolist() for i in range(len(rows))]
        return result[0] if single else result

    def generate_text(self, prompt: str, max_new_tokens: int = 16, **options: Any) -> str:
        """generate() for one text prompt, decoded as bytes (undecodable bytes replaced)."""
        return bytes(self.generate(prompt.encode("utf-8"), max_new_tokens, **options)).decode("utf-8", "replace")

    def stream(self, prompts: Union[Prompt, Sequence[Prompt]], max_new_tokens: int = 16,
               **options: Any) -> Iterator[Any]:
        """A generator of new tokens as they are made: token ids for a single prompt,
        (prompt_index, token) pairs for a list of prompts. The generation runs on a worker
        thread; leaving the loop early (break, an exception, close(), or the generator
        being garbage-collected) cancels it and joins the worker before going on. Do not
        call the engine from elsewhere while a stream is open. options: as generate's."""
        if self.closed:  # said here, on the caller's thread
            raise ValueError("Engine is closed")
        single = _is_single(prompts)
        items: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        token = CancelToken()

        def put(i: int, tok: int) -> None:
            items.put(tok if single else (i, tok))

        def work() -> None:
            try:
                self.generate(prompts, max_new_tokens, on_token=put, cancel=token, **options)
            except BaseException as e:  # raised again on the reading thread
                if not (isinstance(e, CancelledError) and token.cancelled):  # not the reader leaving
                    items.put(e)
            finally:
                items.put(_END)

        worker = threading.Thread(target=work, name="dtrain-stream", daemon=True)
        worker.start()
        try:
            while True:
                item = items.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            token.cancel()
            worker.join()
            token.close()
