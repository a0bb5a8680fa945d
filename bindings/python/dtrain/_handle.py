"""What every dtrain handle shares: an owned native pointer, close(), `with`, options."""
from . import native


class Handle:
    """Owns one libdtrain handle. close() releases it (idempotent); so does leaving a `with`
    block and, as a safety net, garbage collection. A closed handle used again raises
    ValueError. Children keep their parents alive inside libdtrain, so any close order works."""

    _destroy = None  # the native dt_*_destroy of the subclass

    def __init__(self, ptr):
        self._ptr = ptr

    @property
    def _h(self):
        if self._ptr is None:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._ptr

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None:
            type(self)._destroy(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass


def handle_of(obj, cls, arg, allow_none=False):
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

    def __init__(self, values=None):
        super().__init__(native.dt_options_create())
        for key, value in (values or {}).items():
            self[key] = value

    def __setitem__(self, key, value):
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

    def __len__(self):
        return native.dt_options_count(self._h)


def options_ptr(values, stack):
    """A dt_options for a call (None for no values), closed when `stack` closes."""
    if values is None or len(values) == 0:
        return None
    opts = Options(values)
    stack.callback(opts.close)
    return opts._h
