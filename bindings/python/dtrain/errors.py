"""dtrain's exceptions: one class per status code, each also a fitting built-in error."""
from . import native

__all__ = ["DtrainError", "InvalidArgumentError", "OutOfMemoryError", "UnsupportedError",
           "NotFoundError", "DtrainIOError", "CommError", "DtrainTimeoutError", "AbortedError",
           "InternalError", "UnavailableError", "status_name"]


class DtrainError(Exception):
    """A call into libdtrain failed. `status` is the dt_status code, `message` its text."""

    status = -1

    def __init__(self, status, message):
        super().__init__(status, message)
        self.status = status
        self.message = message

    @property
    def status_name(self):
        return status_name(self.status)

    def __str__(self):
        return "%s: %s" % (status_name(self.status), self.message)


class InvalidArgumentError(DtrainError, ValueError):
    status = 1


class OutOfMemoryError(DtrainError, MemoryError):
    status = 2


class UnsupportedError(DtrainError, NotImplementedError):
    status = 3


class NotFoundError(DtrainError, LookupError):
    status = 4


class DtrainIOError(DtrainError, OSError):
    status = 5

    def __init__(self, status, message):  # OSError would read (status, message) as errno
        DtrainError.__init__(self, status, message)


class CommError(DtrainError, ConnectionError):
    status = 6


class DtrainTimeoutError(DtrainError, TimeoutError):
    status = 7


class AbortedError(DtrainError):
    status = 8


class InternalError(DtrainError, RuntimeError):
    status = 9


class UnavailableError(DtrainError):
    """A service cannot take the request now: a server that drains or failed."""
    status = 10


def status_name(status):
    """'DT_OK', 'DT_ERR_TIMEOUT', ... for a status code."""
    return native.dt_status_string(status)


native._set_error_type(0, DtrainError)
for _cls in (InvalidArgumentError, OutOfMemoryError, UnsupportedError, NotFoundError, DtrainIOError,
             CommError, DtrainTimeoutError, AbortedError, InternalError, UnavailableError):
    native._set_error_type(_cls.status, _cls)
