"""dtrain's exceptions: one class per status code, each also a fitting built-in error."""
from . import native

__all__ = ["DtrainError", "InvalidArgumentError", "OutOfMemoryError", "UnsupportedError",
           "NotFoundError", "DtrainIOError", "CommError", "DtrainTimeoutError", "AbortedError",
           "InternalError", "UnavailableError", "CancelledError", "status_name"]


class DtrainError(Exception):
    """A call into libdtrain failed. `status` is the dt_status code, `message` its text."""

    status: int = -1

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message

    @property
    def status_name(self) -> str:
        return status_name(self.status)

    def __str__(self) -> str:
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

    def __init__(self, status: int, message: str) -> None:  # OSError would read (status, message) as errno
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


class CancelledError(DtrainError):
    """The call was cancelled (a CancelToken's cancel(), or a stream left early); the
    handles it used stay usable, and a cancelled train step changed nothing."""
    status = 11


def status_name(status: int) -> str:
    """'DT_OK', 'DT_ERR_TIMEOUT', ... for a status code."""
    return native.dt_status_string(status)


native._set_error_type(0, DtrainError)
for _cls in (InvalidArgumentError, OutOfMemoryError, UnsupportedError, NotFoundError, DtrainIOError,
             CommError, DtrainTimeoutError, AbortedError, InternalError, UnavailableError, CancelledError):
    native._set_error_type(_cls.status, _cls)
