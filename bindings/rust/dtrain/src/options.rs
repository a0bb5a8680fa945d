//! Options: typed values under string keys, as the C calls take them.
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use dtrain_sys as sys;

use crate::error::{check, owned_str, Error, Result};

/// One option value. Build it with `.into()` from an integer, a float, a `bool`, a string,
/// or token ids (`vec![3, 7]`, `[3, 7]`: the string "3,7"):
///
/// ```no_run
/// # use dtrain::{Model, Value};
/// let model = Model::gpt(&[("preset", "gpt-tiny".into()), ("seed", 1.into())])?;
/// # Ok::<(), dtrain::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `dt_options_set_int`
    Int(i64),
    /// `dt_options_set_double`
    Double(f64),
    /// `dt_options_set_bool`
    Bool(bool),
    /// `dt_options_set_string`
    Str(String),
}

macro_rules! value_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
value_from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Double(v)
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Double(f64::from(v))
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Str(v.clone())
    }
}

/// A list of token ids ("stop_tokens", "eos_token_ids"): the string "3,7".
impl From<&[i32]> for Value {
    fn from(ids: &[i32]) -> Value {
        let list: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        Value::Str(list.join(","))
    }
}
impl From<Vec<i32>> for Value {
    fn from(ids: Vec<i32>) -> Value {
        Value::from(ids.as_slice())
    }
}
impl From<&Vec<i32>> for Value {
    fn from(ids: &Vec<i32>) -> Value {
        Value::from(ids.as_slice())
    }
}
impl<const N: usize> From<[i32; N]> for Value {
    fn from(ids: [i32; N]) -> Value {
        Value::from(&ids[..])
    }
}

/// What every constructor takes for its options: `&[("key", value.into()), ...]`, or `&[]`
/// for none.
pub type Pairs<'a> = [(&'a str, Value)];

/// A C string from a Rust one; a NUL byte inside is an error naming `what`.
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("dtrain: {what} {s:?} contains a NUL byte")))
}

/// An owned `dt_options` bag. Constructors build one from their pairs and release it after
/// the call; use this type directly to keep a bag or to read values back.
pub struct Options {
    ptr: NonNull<sys::dt_options>,
}

// SAFETY: a dt_options is a plain value owned by this handle alone; moving it to another
// thread is allowed (one thread at a time), and it is not Sync.
unsafe impl Send for Options {}

impl Options {
    /// An empty bag.
    pub fn new() -> Result<Options> {
        let mut p: *mut sys::dt_options = ptr::null_mut();
        // SAFETY: p is a valid out-pointer.
        check(unsafe { sys::dt_options_create(&mut p) })?;
        let ptr =
            NonNull::new(p).ok_or_else(|| Error::invalid("dt_options_create returned NULL"))?;
        Ok(Options { ptr })
    }

    /// A bag holding every pair (a later duplicate key replaces an earlier one).
    pub fn from_pairs(pairs: &Pairs) -> Result<Options> {
        let mut o = Options::new()?;
        for (k, v) in pairs {
            o.set(k, v.clone())?;
        }
        Ok(o)
    }

    /// Sets `key` to `value`, replacing any value of any type.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> Result<&mut Options> {
        let k = cstring(key, "option key")?;
        let p = self.ptr.as_ptr();
        // SAFETY: p is live; k (and s) outlive the call, which copies them.
        let status = unsafe {
            match value.into() {
                Value::Int(v) => sys::dt_options_set_int(p, k.as_ptr(), v),
                Value::Double(v) => sys::dt_options_set_double(p, k.as_ptr(), v),
                Value::Bool(v) => sys::dt_options_set_bool(p, k.as_ptr(), i32::from(v)),
                Value::Str(v) => {
                    let s = cstring(&v, "option value")?;
                    sys::dt_options_set_string(p, k.as_ptr(), s.as_ptr())
                }
            }
        };
        check(status)?;
        Ok(self)
    }

    pub fn get_int(&self, key: &str) -> Result<i64> {
        let k = cstring(key, "option key")?;
        let mut v = 0i64;
        // SAFETY: live handle, valid key and out-pointer.
        check(unsafe { sys::dt_options_get_int(self.ptr.as_ptr(), k.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// Also reads an int value.
    pub fn get_double(&self, key: &str) -> Result<f64> {
        let k = cstring(key, "option key")?;
        let mut v = 0f64;
        // SAFETY: as above.
        check(unsafe { sys::dt_options_get_double(self.ptr.as_ptr(), k.as_ptr(), &mut v) })?;
        Ok(v)
    }

    pub fn get_bool(&self, key: &str) -> Result<bool> {
        let k = cstring(key, "option key")?;
        let mut v = 0i32;
        // SAFETY: as above.
        check(unsafe { sys::dt_options_get_bool(self.ptr.as_ptr(), k.as_ptr(), &mut v) })?;
        Ok(v != 0)
    }

    pub fn get_string(&self, key: &str) -> Result<String> {
        let k = cstring(key, "option key")?;
        let mut v: *const c_char = ptr::null();
        // SAFETY: as above; the string is owned by the bag and copied at once.
        check(unsafe { sys::dt_options_get_string(self.ptr.as_ptr(), k.as_ptr(), &mut v) })?;
        Ok(unsafe { owned_str(v) })
    }

    /// Number of keys.
    pub fn len(&self) -> Result<usize> {
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_options_count(self.ptr.as_ptr(), &mut n) })?;
        crate::to_usize(n, "option count")
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *const sys::dt_options {
        self.ptr.as_ptr()
    }
}

impl Drop for Options {
    fn drop(&mut self) {
        // SAFETY: the handle is owned and released exactly once.
        unsafe { sys::dt_options_destroy(self.ptr.as_ptr()) }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Options({:p})", self.ptr)
    }
}

/// Options for one call: NULL when there are no pairs (the C default), else a bag that
/// lives until the call returns.
pub(crate) struct CallOptions(Option<Options>);

impl CallOptions {
    pub(crate) fn new(pairs: &Pairs) -> Result<CallOptions> {
        if pairs.is_empty() {
            Ok(CallOptions(None))
        } else {
            Ok(CallOptions(Some(Options::from_pairs(pairs)?)))
        }
    }

    pub(crate) fn ptr(&self) -> *const sys::dt_options {
        self.0.as_ref().map_or(ptr::null(), Options::as_ptr)
    }
}

/// The int value of `key` among `pairs`, if it holds one (the last one wins).
pub(crate) fn find_int(pairs: &Pairs, key: &str) -> Option<i64> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| match v {
            Value::Int(i) => Some(*i),
            _ => None,
        })
}
