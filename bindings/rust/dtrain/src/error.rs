//! Status codes and the crate's error type.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use dtrain_sys as sys;

/// A libdtrain status code (`dt_status`). Codes are only ever appended, so this is an open
/// set: a code this crate does not name still round-trips and prints as `DT_ERR_UNKNOWN`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(pub i32);

impl Status {
    pub const OK: Status = Status(sys::DT_OK as i32);
    pub const INVALID_ARGUMENT: Status = Status(sys::DT_ERR_INVALID_ARGUMENT as i32);
    pub const OUT_OF_MEMORY: Status = Status(sys::DT_ERR_OUT_OF_MEMORY as i32);
    pub const UNSUPPORTED: Status = Status(sys::DT_ERR_UNSUPPORTED as i32);
    pub const NOT_FOUND: Status = Status(sys::DT_ERR_NOT_FOUND as i32);
    pub const IO: Status = Status(sys::DT_ERR_IO as i32);
    pub const COMM: Status = Status(sys::DT_ERR_COMM as i32);
    pub const TIMEOUT: Status = Status(sys::DT_ERR_TIMEOUT as i32);
    pub const ABORTED: Status = Status(sys::DT_ERR_ABORTED as i32);
    pub const INTERNAL: Status = Status(sys::DT_ERR_INTERNAL as i32);
    /// A service cannot take the request now (a server draining or failed).
    pub const UNAVAILABLE: Status = Status(sys::DT_ERR_UNAVAILABLE as i32);
    /// The call was cancelled: a [`crate::CancelToken`] was raised, or a token stream was
    /// left early. Nothing changed; the engine stays usable.
    pub const CANCELLED: Status = Status(sys::DT_ERR_CANCELLED as i32);

    /// The numeric code.
    pub fn code(self) -> i32 {
        self.0
    }

    /// The C name of the code: `"DT_OK"`, `"DT_ERR_IO"`, ... (`"DT_ERR_UNKNOWN"` otherwise).
    pub fn name(self) -> &'static str {
        // SAFETY: dt_status_string returns a static NUL-terminated string for any code.
        unsafe { static_str(sys::dt_status_string(self.0)) }
    }

    pub fn is_ok(self) -> bool {
        self == Status::OK
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of a status code, as `dt_status_string` gives it.
pub fn status_name(code: i32) -> &'static str {
    Status(code).name()
}

/// A failed libdtrain call: its status and the library's message for it (read on the
/// calling thread right after the failing call), or a check this crate made before
/// calling (wrong slice length or dtype, a closed handle, a NUL byte in a string), which
/// reports `Status::INVALID_ARGUMENT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the call was cancelled ([`Status::CANCELLED`]) rather than failed.
    pub fn is_cancelled(&self) -> bool {
        self.status == Status::CANCELLED
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::INVALID_ARGUMENT, message)
    }

    pub(crate) fn closed(what: &str) -> Error {
        Error::invalid(format!("dtrain: this {what} handle is closed"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status into a `Result`, reading the thread-local message at once. Called right
/// after the C call on the same thread (Rust never moves a running thread's code between
/// OS threads), so the message is the one for this failure.
pub(crate) fn check(status: sys::dt_status) -> Result<()> {
    if status == sys::DT_OK as sys::dt_status {
        return Ok(());
    }
    // SAFETY: dt_last_error_message returns a valid NUL-terminated thread-local string.
    let message = unsafe { owned_str(sys::dt_last_error_message()) };
    Err(Error {
        status: Status(status),
        message,
    })
}

/// A `'static` string from one of the library's static strings ("" for NULL).
pub(crate) unsafe fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("?")
}

/// A copy of a C string ("" for NULL).
pub(crate) unsafe fn owned_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    CStr::from_ptr(p).to_string_lossy().into_owned()
}
