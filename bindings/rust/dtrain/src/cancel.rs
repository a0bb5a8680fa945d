//! Cancellation: a flag any thread may raise to stop an engine call (`dt_cancel`).
use std::sync::Arc;

use dtrain_sys as sys;

use crate::error::{check, Error, Result, Status};

/// Owns one reference to a C flag; the last clone of a [`CancelToken`] releases it.
struct Flag(*mut sys::dt_cancel);

// SAFETY: dt_cancel_request, dt_cancel_reset and dt_cancel_is_requested are thread-safe
// (dtrain.h). dt_cancel_destroy must not run concurrently with a request on the same
// handle: it runs only in Drop, when the last `Arc<Flag>` goes, so no other thread holds
// the flag any more.
unsafe impl Send for Flag {}
unsafe impl Sync for Flag {}

impl Drop for Flag {
    fn drop(&mut self) {
        // SAFETY: owned; released exactly once. An engine it is attached to keeps its own
        // reference.
        unsafe { sys::dt_cancel_destroy(self.0) }
    }
}

/// Stops the engine calls it is passed to (`Engine::train_step_cancellable`, ...): raise it
/// with [`CancelToken::cancel`] from any thread and the call returns
/// `Err` with [`Status::CANCELLED`] at its next check point (a train step or an eval
/// between layers or micro-batches, a generation before each decode step). The engine stays
/// usable and a cancelled train step changes nothing.
///
/// Clones share one flag (`Send + Sync`): keep one, hand another to a watchdog thread. A
/// raised token stays raised, so a call given it later fails at once; [`CancelToken::reset`]
/// lowers it for reuse.
///
/// ```no_run
/// # fn demo(engine: &mut dtrain::Engine, x: &dtrain::Tensor, y: &dtrain::Tensor) -> dtrain::Result<()> {
/// let token = dtrain::CancelToken::new()?;
/// let remote = token.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_millis(200));
///     remote.cancel();
/// });
/// match engine.train_step_cancellable(x, y, &token) {
///     Err(e) if e.is_cancelled() => println!("stopped; nothing changed"),
///     other => println!("loss {}", other?),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CancelToken(Arc<Flag>);

impl CancelToken {
    /// A new flag, not raised.
    pub fn new() -> Result<CancelToken> {
        let mut p: *mut sys::dt_cancel = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::dt_cancel_create(&mut p) })?;
        if p.is_null() {
            return Err(Error::new(
                Status::INTERNAL,
                "dtrain: dt_cancel_create returned NULL",
            ));
        }
        Ok(CancelToken(Arc::new(Flag(p))))
    }

    /// Raises the flag: the calls watching it stop. Idempotent, never blocks, callable from
    /// any thread (one atomic store).
    pub fn cancel(&self) {
        // SAFETY: a live flag; the only failure is a NULL handle, which this is not.
        unsafe { sys::dt_cancel_request(self.0 .0) };
    }

    /// Whether the flag is raised.
    pub fn is_cancelled(&self) -> bool {
        let mut v = 0i32;
        // SAFETY: a live flag, valid out-pointer.
        let status = unsafe { sys::dt_cancel_is_requested(self.0 .0, &mut v) };
        status == sys::DT_OK as sys::dt_status && v != 0
    }

    /// Lowers the flag again, so that the token can be passed to another call.
    pub fn reset(&self) {
        // SAFETY: a live flag.
        unsafe { sys::dt_cancel_reset(self.0 .0) };
    }

    pub(crate) fn raw(&self) -> *mut sys::dt_cancel {
        self.0 .0
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CancelToken(cancelled: {})", self.is_cancelled())
    }
}
