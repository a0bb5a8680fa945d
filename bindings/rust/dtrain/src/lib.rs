//! Safe Rust API for libdtrain, over the raw `dtrain-sys` bindings of its C ABI.
//!
//! ```no_run
//! use dtrain::{Dataset, Engine, Loader, Mesh, Model, Optimizer};
//! # fn main() -> dtrain::Result<()> {
//! let mesh = Mesh::new("local", 2, &[])?;
//! let model = Model::gpt(&[("preset", "gpt-tiny".into()), ("seed", 1.into())])?;
//! let opt = Optimizer::new(&model, "adamw", &[("lr", 0.003.into())])?;
//! let mut engine = Engine::new(Some(&mesh), &model, &opt, &[])?;
//! let data = Dataset::new("addition", &[("digits", 3.into()), ("split", "train".into())])?;
//! let loader = Loader::new(&data, &[("batch", 16.into())])?;
//! for batch in loader.take(30) {
//!     let (x, y) = batch?;
//!     println!("loss {:.8}", engine.train_step(&x, &y)?);
//! }
//! let prompt: Vec<i32> = "123+456=".bytes().map(i32::from).collect();
//! for token in engine.stream(&prompt, &[("max_new_tokens", 5.into())])? {
//!     print!("{}", token? as u8 as char);
//! }
//! # Ok(()) }
//! ```
//!
//! * Every fallible call returns [`Result`]; an [`Error`] carries the library's [`Status`]
//!   and its message (read on the same thread right after the failing call).
//! * Handles ([`Tensor`], [`Mesh`], [`Model`], [`Optimizer`], [`Engine`], [`Dataset`],
//!   [`Loader`], [`Options`]) release themselves on drop; `close()` releases early and is
//!   idempotent, and a closed handle used again is an `Err`, never a crash. A handle made
//!   from another keeps it alive, so they may be dropped in any order.
//! * Handles are `Send` (the C library lets a handle move between threads) but not `Sync`
//!   (one thread at a time); handles that share state lock each other out (handle.rs).
//!
//!   ```compile_fail
//!   fn shared<T: Sync>() {}
//!   shared::<dtrain::Engine>(); // an engine is not Sync
//!   ```
//!   ```compile_fail
//!   fn shared<T: Sync>() {}
//!   shared::<dtrain::Tensor>(); // nor is a tensor (or a model, mesh, ...)
//!   ```
//! * Cancellation: a [`CancelToken`] (`Send + Sync`, cloneable) raised from any thread stops
//!   `Engine::train_step_cancellable`, `eval_cancellable` or `generate_cancellable` with
//!   [`Status::CANCELLED`] within one layer or decode step; the engine stays usable.
//!   [`Mesh::abort_handle`] fails a whole mesh from another thread instead.
//! * Streaming: [`Engine::stream`] is an iterator over new tokens; dropping it early stops
//!   the generation. [`Loader`] is an iterator over batches.
//! * Zero-copy: [`Tensor::as_slice`] / [`Tensor::as_mut_slice`] view a CPU tensor's
//!   elements in place; [`Tensor::from_vec`] lends a `Vec`'s memory to a tensor.
//! * No input makes a call panic: sizes are checked and a bad one is an `Err`
//!   (`Status::INVALID_ARGUMENT`, or `Status::OUT_OF_MEMORY` for an allocation that fails).
//! * Options are slices of `(key, Value)` pairs: `&[("lr", 0.003.into())]`, `&[]` for none.
//! * Hugging Face: [`Model::from_hf`], [`Model::save_hf`], [`Engine::save_hf`] and
//!   [`hf_inspect_json`] read and write model directories; a [`Tokenizer`] (`Send + Sync`:
//!   it is immutable) encodes, decodes and applies chat templates, and a [`Detokenizer`]
//!   turns a stream of ids into text as it becomes final.
//! * Planning: [`plan_json`] costs a GPT's parallel layout on a cluster (built in, or this
//!   machine's from [`calibrate_cluster_json`], several of them merged by
//!   [`median_cluster_json`]) or searches its layouts, without building
//!   the model.
//! * Serving: a [`Server`] (`Send + Sync`: its calls are thread-safe) runs continuous
//!   batching on its own thread; [`Server::submit`] returns a [`Request`], an iterator over
//!   its new token ids.
//!
//!   ```no_run
//!   # fn main() -> dtrain::Result<()> {
//!   let model = dtrain::Model::gpt(&[("preset", "gpt-tiny".into())])?;
//!   let server = dtrain::Server::new(None, &model, &[("block_size", 16.into())])?;
//!   let tokens: Vec<i32> = server.submit(&[1, 2, 3], &[("max_tokens", 8.into())])?.collect();
//!   # Ok(()) }
//!   ```

mod cancel;
mod data;
mod engine;
mod error;
mod handle;
mod hf;
mod mesh;
mod model;
mod options;
mod server;
mod stream;
mod tensor;

use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;

pub use dtrain_sys as sys;

pub use cancel::CancelToken;
pub use data::{Dataset, Loader};
pub use engine::Engine;
pub use error::{status_name, Error, Result, Status};
pub use hf::{hf_inspect_json, Detokenizer, Message, Tokenizer};
pub use mesh::{CommStats, Mesh, MeshAbortHandle, ReduceOp};
pub use model::{loss, Model, Optimizer};
pub use options::{Options, Pairs, Value};
pub use server::{Request, RequestState, Server};
pub use stream::TokenStream;
pub use tensor::{matmul, softmax, DType, Element, Tensor};

use error::{check, static_str};
use options::{cstring, CallOptions};

/// The loaded library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: a static string.
    unsafe { static_str(sys::dt_version()) }
}

/// The loaded library's version as major*10000 + minor*100 + patch.
pub fn version_number() -> i32 {
    // SAFETY: no arguments.
    unsafe { sys::dt_version_number() }
}

/// The version of the header these bindings were generated from.
pub const HEADER_VERSION_NUMBER: i32 = sys::DT_VERSION_NUMBER as i32;

/// Process-wide settings: "threads", "memory_limit_bytes", "pool_cache_bytes".
pub fn configure(options: &Pairs) -> Result<()> {
    let opts = CallOptions::new(options)?;
    // SAFETY: valid options or NULL.
    check(unsafe { sys::dt_configure(opts.ptr()) })
}

/// Finalizes MPI if libdtrain initialized it (`dt_shutdown`). libdtrain also does this when
/// the process exits normally, which a Rust program does on returning from `main`; call it
/// yourself only where the process ends another way. Idempotent.
pub fn shutdown() -> Result<()> {
    // SAFETY: no arguments; the C API allows it at any time with no other call in flight.
    check(unsafe { sys::dt_shutdown() })
}

/// What a block of memory holds (`dt_mem_tag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemTag {
    /// In queries: the sum over every tag.
    All,
    Param,
    Grad,
    Optimizer,
    Activation,
    KvCache,
    CommBuffer,
    Workspace,
    /// A save's staged copy while it is written.
    Checkpoint,
}

impl MemTag {
    pub fn code(self) -> i32 {
        (match self {
            MemTag::All => sys::DT_MEM_ALL,
            MemTag::Param => sys::DT_MEM_PARAM,
            MemTag::Grad => sys::DT_MEM_GRAD,
            MemTag::Optimizer => sys::DT_MEM_OPTIMIZER,
            MemTag::Activation => sys::DT_MEM_ACTIVATION,
            MemTag::KvCache => sys::DT_MEM_KV_CACHE,
            MemTag::CommBuffer => sys::DT_MEM_COMM_BUFFER,
            MemTag::Workspace => sys::DT_MEM_WORKSPACE,
            MemTag::Checkpoint => sys::DT_MEM_CHECKPOINT,
        }) as i32
    }

    /// "all", "param", "grad", ...
    pub fn name(self) -> &'static str {
        // SAFETY: a static string.
        unsafe { static_str(sys::dt_mem_tag_name(self.code())) }
    }
}

/// Bytes held now and at the peak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub current: i64,
    pub peak: i64,
}

/// Bytes held by tensors on `device` ("cpu", "cuda:N") under `tag`.
pub fn memory_stats(device: &str, tag: MemTag) -> Result<MemoryStats> {
    let d = cstring(device, "device")?;
    let mut s = MemoryStats::default();
    // SAFETY: valid string and out-pointers.
    check(unsafe { sys::dt_memory_stats(d.as_ptr(), tag.code(), &mut s.current, &mut s.peak) })?;
    Ok(s)
}

/// The same for the memory of one rank.
pub fn memory_rank_stats(device: &str, rank: i32, tag: MemTag) -> Result<MemoryStats> {
    let d = cstring(device, "device")?;
    let mut s = MemoryStats::default();
    // SAFETY: valid string and out-pointers.
    check(unsafe {
        sys::dt_memory_rank_stats(d.as_ptr(), rank, tag.code(), &mut s.current, &mut s.peak)
    })?;
    Ok(s)
}

/// Sets every peak on `device` to its current value.
pub fn memory_reset_peak(device: &str) -> Result<()> {
    let d = cstring(device, "device")?;
    // SAFETY: valid string.
    check(unsafe { sys::dt_memory_reset_peak(d.as_ptr()) })
}

/// The memory ledger of `device` as JSON.
pub fn memory_report_json(device: &str) -> Result<String> {
    let d = cstring(device, "device")?;
    // SAFETY: valid string; read_json passes a buffer of `cap` bytes.
    read_json(|buf, cap, needed| unsafe {
        sys::dt_memory_report_json(d.as_ptr(), buf, cap, needed)
    })
}

/// Number of devices of `kind` ("cpu" is 1; "cuda" is 0 without a usable GPU).
pub fn device_count(kind: &str) -> Result<i32> {
    let k = cstring(kind, "device kind")?;
    let mut n = 0i32;
    // SAFETY: valid string and out-pointer.
    check(unsafe { sys::dt_device_count(k.as_ptr(), &mut n) })?;
    Ok(n)
}

/// A checkpoint's metadata as JSON ({"step":..,"config":{..},"tensors":..}).
pub fn checkpoint_info_json(path_stem: impl AsRef<Path>) -> Result<String> {
    let stem = path_cstring(path_stem.as_ref())?;
    // SAFETY: valid string; read_json passes a buffer of `cap` bytes.
    read_json(|buf, cap, needed| unsafe {
        sys::dt_checkpoint_info_json(stem.as_ptr(), buf, cap, needed)
    })
}

/// The layout planner's report (`dt_plan_json`) as JSON, without building the model:
/// `config` holds [`Model::gpt`]'s keys, `plan` the layout's ("dp", "tp", "pp",
/// "micro_batch", "seq_len", "accumulation", "sequence_parallel", "pp_schedule",
/// "virtual_stages", ...). With "cluster" (a built-in name such as "h100-node" or
/// "h100-node:16", or a cluster's JSON text, e.g. [`calibrate_cluster_json`]'s) the report
/// gains "cost" (per rank "memory" and "peak_bytes", "step_s", "tokens_per_s", "mfu",
/// "time", "fits"), read with "zero", "recompute" and "in_process"; "search": true instead
/// returns {"search": ...}, the "top" fastest layouts of the cluster's devices for
/// "global_batch" sequences. An unknown cluster name is `Status::NOT_FOUND`, its message
/// naming the built-in ones.
pub fn plan_json(config: &Pairs, plan: &Pairs) -> Result<String> {
    let c = CallOptions::new(config)?;
    let p = CallOptions::new(plan)?;
    // SAFETY: valid options (or NULL); read_json passes a buffer of `cap` bytes.
    read_json(|buf, cap, needed| unsafe { sys::dt_plan_json(c.ptr(), p.ptr(), buf, cap, needed) })
}

/// This machine measured as a cluster for [`plan_json`]'s "cluster"
/// (`dt_cluster_calibrate_json`): GEMM, attention and elementwise rates on one core and on
/// all of them, and the local backend's all-reduce latency and bandwidth, as JSON. It takes
/// a few seconds and times the cores: run it with nothing else heavy going on.
pub fn calibrate_cluster_json() -> Result<String> {
    // A first buffer that holds a cluster's JSON: the cores are timed once, not twice.
    // SAFETY: NULL options; read_json_from passes a buffer of `cap` bytes.
    read_json_from(65536, |buf, cap, needed| unsafe {
        sys::dt_cluster_calibrate_json(std::ptr::null(), buf, cap, needed)
    })
}

/// The field-by-field median of several calibrations of one machine
/// (`dt_cluster_median_json`): `clusters` is a JSON array of clusters (what
/// [`calibrate_cluster_json`] returns); each rate, fitted figure and link figure is their
/// median. On a shared host single calibrations' fitted figures differ by 10-20%.
pub fn median_cluster_json(clusters: &str) -> Result<String> {
    let c = cstring(clusters, "clusters")?;
    // SAFETY: a NUL-terminated string; read_json passes a buffer of `cap` bytes.
    read_json(|buf, cap, needed| unsafe { sys::dt_cluster_median_json(c.as_ptr(), buf, cap, needed) })
}

/// Starts (clearing what was recorded) or stops recording the timeline.
pub fn trace_enable(on: bool) -> Result<()> {
    // SAFETY: no pointers.
    check(unsafe { sys::dt_trace_enable(i32::from(on)) })
}

/// Writes the recorded timeline as Chrome trace-event JSON to `path`.
pub fn trace_write(path: impl AsRef<Path>) -> Result<()> {
    let p = path_cstring(path.as_ref())?;
    // SAFETY: valid string.
    check(unsafe { sys::dt_trace_write(p.as_ptr()) })
}

/// Calls a "write JSON into buf" function twice: once for the size, once to fill (again
/// if it grew in between).
pub(crate) fn read_json(
    f: impl FnMut(*mut c_char, usize, *mut usize) -> sys::dt_status,
) -> Result<String> {
    read_json_from(0, f)
}

/// [`read_json`] starting from a buffer of `capacity` bytes (0: ask for the size first), so
/// that a report costly to make (a calibration) is made once where it fits.
pub(crate) fn read_json_from(
    capacity: usize,
    mut f: impl FnMut(*mut c_char, usize, *mut usize) -> sys::dt_status,
) -> Result<String> {
    let mut needed = capacity;
    if needed == 0 {
        check(f(std::ptr::null_mut(), 0, &mut needed))?;
    }
    loop {
        let mut buf = vec![0u8; needed.max(1)];
        let cap = buf.len();
        check(f(buf.as_mut_ptr() as *mut c_char, cap, &mut needed))?;
        if needed <= cap {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(cap);
            buf.truncate(end);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }
}

/// An empty vector with room for `n` elements: `Status::INVALID_ARGUMENT` when the size
/// overflows, `Status::OUT_OF_MEMORY` when it cannot be allocated, where `Vec::with_capacity`
/// would panic or abort. For sizes that come from the caller.
pub(crate) fn try_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let bytes = n.checked_mul(std::mem::size_of::<T>());
    if bytes.map_or(true, |b| b > isize::MAX as usize) {
        return Err(Error::invalid(format!(
            "dtrain: {what}: {n} elements overflow the address space"
        )));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::new(
            Status::OUT_OF_MEMORY,
            format!("dtrain: cannot allocate {what} ({n} elements)"),
        )
    })?;
    Ok(v)
}

/// `n` copies of `value`, allocated as [`try_with_capacity`] does.
pub(crate) fn try_filled<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// A count from the library or the caller as usize (`Status::INVALID_ARGUMENT` if negative
/// or too large for this platform).
pub(crate) fn to_usize(n: i64, what: &str) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::invalid(format!("dtrain: {what} {n} does not fit usize")))
}

/// A path as a C string (its bytes, on Unix).
pub(crate) fn path_cstring(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or_else(|| Error::invalid(format!("dtrain: path {path:?} is not UTF-8")))?
        .as_bytes()
        .to_vec();
    CString::new(bytes)
        .map_err(|_| Error::invalid(format!("dtrain: path {path:?} contains a NUL byte")))
}
