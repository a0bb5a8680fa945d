//! Owned handles and the locks that make them `Send`.
//!
//! The C rule is "a handle is used by one host thread at a time; distinct handles are
//! independent", so a handle may move between threads (`Send`) but not be shared (`!Sync`).
//! Some distinct handles share state, though: an engine works on its model and optimizer
//! and its mesh, a parameter view writes the model's weights, a piece views its mesh
//! tensor's storage. Moving two such handles to two threads must not let them race, so
//! handles that share state share a *family* lock and every call that touches a handle
//! holds its family's lock (several families are taken in one global order, by address,
//! so two calls never wait on each other in a cycle). Uncontended, it costs a few
//! nanoseconds per call. Releasing a handle takes no lock: the C library counts references
//! atomically and a child keeps its parent alive.
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Clone, Default)]
pub(crate) struct Family(Arc<Mutex<()>>);

impl Family {
    pub(crate) fn new() -> Family {
        Family::default()
    }

    /// Whether no other handle shares this family, so that no call made through another
    /// handle can touch this one's memory (zero-copy slices rely on it).
    pub(crate) fn is_exclusive(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// Held while a call runs; unlocks on drop.
pub(crate) struct Locked<'a>(#[allow(dead_code)] Vec<MutexGuard<'a, ()>>);

/// Locks every distinct family in `families`, in address order.
pub(crate) fn lock<'a>(families: &[&'a Family]) -> Locked<'a> {
    let mut fams: Vec<&'a Family> = families.to_vec();
    fams.sort_by_key(|f| f.addr());
    fams.dedup_by_key(|f| f.addr());
    // A poisoned lock only means another thread panicked while holding it; the C handle
    // is still consistent (a call either finished or never started).
    Locked(
        fams.into_iter()
            .map(|f| f.0.lock().unwrap_or_else(|e| e.into_inner()))
            .collect(),
    )
}

/// Defines an owned handle type: a raw pointer (NULL once closed), its family, and any
/// extra fields (given to `from_raw` in order).
macro_rules! handle {
    ($(#[$meta:meta])* $name:ident, $raw:ty, $destroy:path, $noun:literal
     $(, $field:ident: $fty:ty)*) => {
        $(#[$meta])*
        pub struct $name {
            ptr: *mut $raw,
            fam: $crate::handle::Family,
            $($field: $fty,)*
        }

        // SAFETY: the C library lets a handle be used from any thread, one at a time;
        // `&mut`/`&` rules plus !Sync give "one at a time" for this handle, and the family
        // lock gives it for the other handles that share its state (see handle.rs).
        unsafe impl Send for $name {}

        impl $name {
            #[allow(dead_code)]
            pub(crate) fn from_raw(
                ptr: *mut $raw,
                fam: $crate::handle::Family,
                $($field: $fty,)*
            ) -> $name {
                $name { ptr, fam, $($field,)* }
            }

            /// Releases the handle now. Idempotent; dropping does the same. Any later call
            /// on it fails with `Status::INVALID_ARGUMENT` ("... handle is closed"). Handles
            /// made from this one keep working: the library counts references.
            pub fn close(&mut self) {
                let p = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
                if !p.is_null() {
                    // SAFETY: p was owned by this handle and is released exactly once.
                    unsafe { $destroy(p) }
                }
            }

            /// Whether [`close`](Self::close) has run.
            pub fn is_closed(&self) -> bool {
                self.ptr.is_null()
            }

            /// The raw C handle (NULL once closed), for calls this crate does not wrap.
            /// It stays owned by `self`.
            pub fn as_raw(&self) -> *mut $raw {
                self.ptr
            }

            #[allow(dead_code)]
            pub(crate) fn raw(&self) -> $crate::Result<*mut $raw> {
                if self.ptr.is_null() {
                    Err($crate::Error::closed($noun))
                } else {
                    Ok(self.ptr)
                }
            }

            #[allow(dead_code)]
            pub(crate) fn family(&self) -> &$crate::handle::Family {
                &self.fam
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                self.close();
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                if self.ptr.is_null() {
                    write!(f, concat!(stringify!($name), "(closed)"))
                } else {
                    write!(f, concat!(stringify!($name), "({:p})"), self.ptr)
                }
            }
        }
    };
}
pub(crate) use handle;

/// Runs a create call that fills `*out`, turning its status into a `Result`.
macro_rules! create {
    ($raw:ty, |$out:ident| $call:expr) => {{
        let mut $out: *mut $raw = std::ptr::null_mut();
        // SAFETY: the caller's call gets valid pointers and a valid out-pointer.
        $crate::error::check(unsafe { $call })?;
        if $out.is_null() {
            return Err($crate::Error::new(
                $crate::Status::INTERNAL,
                "dtrain: a create call returned NULL",
            ));
        }
        $out
    }};
}
pub(crate) use create;
