"""dtrain.CancelToken: a flag another thread raises to stop a running engine call."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional

from . import native
from ._handle import Handle


class CancelToken(Handle):
    """A cancellation flag (dt_cancel). Pass it as `cancel=` to Engine.train_step, eval,
    generate or stream; cancel() from any thread (or a timer, or a signal handler) makes
    the call raise CancelledError promptly, leaving the engine usable (a cancelled train
    step changes nothing). The flag stays raised: a later call with it fails at once,
    until reset(). cancel() and close() may come from different threads."""

    _destroy = staticmethod(native.dt_cancel_destroy)

    def __init__(self) -> None:
        # The header forbids a request concurrent with the destroy: the lock orders them
        # (reentrant, so a signal handler that cancels during close() on its thread is fine).
        self._lock = threading.RLock()
        super().__init__(native.dt_cancel_create())

    def cancel(self) -> None:
        """Raises the flag (idempotent; at once). A closed token ignores it: whatever it
        guarded has ended."""
        with self._lock:
            if self._ptr is not None:
                native.dt_cancel_request(self._ptr)

    def close(self) -> None:
        with self._lock:
            super().close()

    def reset(self) -> None:
        """Lowers the flag, for reuse."""
        native.dt_cancel_reset(self._h)

    @property
    def cancelled(self) -> bool:
        return bool(native.dt_cancel_is_requested(self._h))

    def __repr__(self) -> str:
        return "CancelToken(%s)" % ("closed" if self.closed else "cancelled" if self.cancelled else "armed")


@contextlib.contextmanager
def attached(engine_ptr: Any, token: Optional[CancelToken]) -> Iterator[None]:
    """Attaches `token` to the engine for one call, and detaches it after."""
    if token is None:
        yield
        return
    if not isinstance(token, CancelToken):
        raise TypeError("cancel must be a dtrain.CancelToken or None, not %s" % type(token).__name__)
    native.dt_engine_set_cancel(engine_ptr, token._h)
    try:
        yield
    finally:
        native.dt_engine_set_cancel(engine_ptr, None)
