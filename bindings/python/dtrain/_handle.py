"""What every dtrain handle shares: an owned native pointer, close(), `with`, options."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Optional, Type, TypeVar

from . import native

H = TypeVar("H", bound="Handle")


class Handle:
    """Owns one libdtrain handle. close() releases it (idempotent); so does leaving a `with`
    block and, as a safety net, garbage collection. A closed handle used again raises
    ValueError. Children keep their parents alive inside libdtrain, so any close order works."""

    _destroy: Optional[Callable[[Any], None]] = None  # the native dt_*_destroy of the subclass

    def __init__(self, ptr: Any) -> None:
        self._ptr = ptr

    @property
    def _h(self) -> Any:
        if self._ptr is None:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None:
            type(self)._destroy(ptr)  # type: ignore[misc]

    def __enter__(self: H) -> H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass


def handle_of(obj: Any, cls: Type["Handle"], arg: str, allow_none: bool = False) -> Any:
    """The native pointer of `obj`, which must be a `cls` (or None when allowed)."""
    if obj is None and allow_none:
        return None
    if not isinstance(obj, cls):
        raise TypeError("%s must be a dtrain.%s%s, not %s" % (arg, cls.__name__, " or None" if allow_none else "",
                                                            type(obj).__name__))
    return obj._h


class Options(Handle):
    """A dt_options bag built from a dict: int, float, bool and str values."""

    _destroy = staticmethod(native.dt_options_destroy)

    def __init__(self, values: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(native.dt_options_create())
        for key, value in (values or {}).items():
            self[key] = value

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError("option keys are str, not %s" % type(key).__name__)
        if isinstance(value, bool):
            native.dt_options_set_bool(self._h, key, int(value))
        elif isinstance(value, int):
            native.dt_options_set_int(self._h, key, value)
        elif isinstance(value, float):
            native.dt_options_set_double(self._h, key, value)
        elif isinstance(value, str):
            native.dt_options_set_string(self._h, key, value)
        else:
            raise TypeError("option %r: accepted value types are int, float, bool and str, not %s"
                            % (key, type(value).__name__))

    def __len__(self) -> int:
        return native.dt_options_count(self._h)


def options_ptr(values: Optional[Mapping[str, Any]], stack: contextlib.ExitStack) -> Any:
    """A dt_options for a call (None for no values), closed when `stack` closes."""
    if values is None or len(values) == 0:
        return None
    opts = Options(values)
    stack.callback(opts.close)
    return opts._h
