"""dtrain.Server: continuous batching over a paged KV cache (dt_server), and its Requests.

    with dtrain.Server(model, block_size=16) as server:
        request = server.submit([1, 2, 3], max_tokens=8)
        for token in request:        # each new token id as the server makes it
            ...
        print(server.stats()["requests"]["finished"])

The server runs on its own thread. Its C callback would run there too, so this binding
never passes one: a Request reads its tokens with dt_server_poll, which waits with the GIL
released, so other Python threads (and other requests) run meanwhile.
"""
from __future__ import annotations

import array
import collections
import contextlib
from typing import Any, Iterator, List, Optional, Sequence, Union

from . import native
from ._handle import Handle, handle_of, options_ptr
from ._json import read_json, read_text
from .mesh import Mesh
from .model import Model

# DT_REQUEST_* by value: what Request.state returns.
STATES = ("waiting", "running", "preempted", "finished", "aborted", "rejected")
_POLL_MS = 100  # how long one poll waits for news (iteration polls again until there is some)
_CHUNK = 256    # tokens taken per poll at most


def _prompt(prompt_ids: Union[str, bytes, Sequence[int]]) -> array.array:
    """A prompt as an int32 array: token ids, or a str/bytes as its bytes."""
    if isinstance(prompt_ids, str):
        prompt_ids = prompt_ids.encode("utf-8")
    ids = array.array("i", list(prompt_ids))
    if len(ids) == 0:
        raise ValueError("prompt_ids: at least one token")
    return ids


class Request:
    """A submitted request. Iterating it yields its new token ids as the server makes them
    and ends when the request ends (a stop token, max_tokens, a cancel, a rejection): check
    `state` then. Iterate from one thread; cancel() may come from any."""

    def __init__(self, server: "Server", request_id: int) -> None:
        self._server = server  # kept alive while the request is read
        self.id = request_id
        self._tokens: "collections.deque[int]" = collections.deque()
        self._state = 0
        self._done = False
        self._buf = array.array("i", bytes(4 * _CHUNK))

    def _poll(self, timeout_ms: int) -> None:
        n, state, done = native.dt_server_poll(self._server._h, self.id, self._buf, timeout_ms)
        self._tokens.extend(self._buf[:n])
        self._state = state
        self._done = bool(done)

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        while not self._tokens:
            if self._done:
                raise StopIteration
            self._poll(_POLL_MS)
        return self._tokens.popleft()

    @property
    def state(self) -> str:
        """"waiting", "running", "preempted", "finished", "aborted" or "rejected"."""
        if not self._done:
            self._poll(0)
        return STATES[self._state] if 0 <= self._state < len(STATES) else str(self._state)

    @property
    def done(self) -> bool:
        """True once the request ended and the server handed over all of its tokens."""
        if not self._done:
            self._poll(0)
        return self._done

    def cancel(self) -> bool:
        """Aborts the request (its KV blocks are freed; iteration then ends, state "aborted").
        Returns False when it had already ended."""
        if self._done:
            return False
        try:
            native.dt_server_cancel(self._server._h, self.id)
        except LookupError:  # NotFoundError: it ended in the meantime
            return False
        return True

    def __repr__(self) -> str:
        return "Request(id=%d%s)" % (self.id, ", done" if self._done else "")


class Server(Handle):
    """Server(module, mesh=None, **options): serves a GPT `module`'s current weights (copied;
    do not train the module while the server lives). mesh: None (one rank) or a "local"
    mesh whose dp axis is the number of replicas, tp splits heads, pp places blocks.
    options: block_size, kv_blocks, kv_cache_bytes, max_num_seqs, max_batched_tokens,
    prefix_caching, pp_blocks. Its methods may be called from any thread; close() (or
    leaving `with`) aborts what is in flight, once no other thread is in a call on it."""

    _destroy = staticmethod(native.dt_server_destroy)

    def __init__(self, module: Model, mesh: Optional[Mesh] = None, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_server_create(handle_of(mesh, Mesh, "mesh", allow_none=True),
                                                     handle_of(module, Model, "module"),
                                                     options_ptr(options, stack)))

    def submit(self, prompt_ids: Union[str, bytes, Sequence[int]], **sampling: Any) -> Request:
        """Queues a request: prompt_ids (token ids, or str/bytes as bytes). sampling:
        max_tokens (default 16), temperature (0: greedy), top_k, top_p, seed, stop_tokens
        (a list of ids, or a string "3,7"). Returns its Request. Thread-safe.
        UnavailableError while the server drains or after it failed."""
        stop = sampling.get("stop_tokens")
        if stop is not None and not isinstance(stop, str):
            sampling["stop_tokens"] = ",".join(str(int(t)) for t in stop)
        with contextlib.ExitStack() as stack:
            request_id = native.dt_server_submit(self._h, _prompt(prompt_ids), options_ptr(sampling, stack))
        return Request(self, request_id)

    def generate(self, prompt_ids: Union[str, bytes, Sequence[int]], **sampling: Any) -> List[int]:
        """submit() and wait: the request's new tokens as a list."""
        return list(self.submit(prompt_ids, **sampling))

    def drain(self, timeout_ms: int = 60000) -> None:
        """Stops accepting requests and waits for those in flight to end (DtrainTimeoutError
        if some still run after timeout_ms). The GIL is released while it waits."""
        native.dt_server_drain(self._h, int(timeout_ms))

    def stats(self) -> Any:
        """Statistics as a dict: requests (waiting, running, finished, ...), tokens,
        tokens_per_s, ttft_s and itl_s percentiles, kv_cache, preemptions."""
        return read_json(lambda buf: native.dt_server_stats_json(self._h, buf))

    def metrics(self) -> str:
        """The same figures in Prometheus text format."""
        return read_text(lambda buf: native.dt_server_metrics_text(self._h, buf))

    @property
    def context(self) -> int:
        """The model's context length (a prompt plus its tokens must fit)."""
        return native.dt_server_model_info(self._h)[0]

    @property
    def vocab_size(self) -> int:
        return native.dt_server_model_info(self._h)[1]
