//! The training engine: train steps, evaluation, generation and checkpoints.
use std::any::Any;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

use dtrain_sys as sys;

use crate::error::{check, Error, Result};
use crate::handle::{create, lock, Family, Locked};
use crate::mesh::Mesh;
use crate::model::{Model, Optimizer};
use crate::options::{find_int, CallOptions, Pairs};
use crate::tensor::Tensor;
use crate::{path_cstring, read_json};

/// Trains a GPT with an optimizer of it (`dt_engine`), data parallel over a mesh or alone.
/// Keeps the mesh, model and optimizer alive, so they may be closed first.
pub struct Engine {
    ptr: *mut sys::dt_engine,
    model_fam: Family,
    mesh_fam: Option<Family>,
}

// SAFETY: see handle.rs: every call holds the locks of the model's and the mesh's
// families, so no other handle that shares this engine's state runs at the same time.
unsafe impl Send for Engine {}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ptr.is_null() {
            write!(f, "Engine(closed)")
        } else {
            write!(f, "Engine({:p})", self.ptr)
        }
    }
}

/// Default capacity per prompt when the options do not say "max_new_tokens".
const DEFAULT_MAX_NEW_TOKENS: i64 = 16;
/// Bounds what generate allocates per prompt for an absurd "max_new_tokens", which the
/// library then rejects (it must fit the context), as the Go and Java bindings do.
const MAX_GENERATE_CAPACITY: i64 = 1 << 20;

struct Prompts {
    tokens: Vec<i32>,
    lengths: Vec<i64>,
    n: i32,
}

fn flatten<P: AsRef<[i32]>>(prompts: &[P]) -> Result<Prompts> {
    let n = i32::try_from(prompts.len()).map_err(|_| Error::invalid("dtrain: too many prompts"))?;
    let mut tokens = Vec::new();
    let mut lengths = Vec::with_capacity(prompts.len());
    for p in prompts {
        tokens.extend_from_slice(p.as_ref());
        lengths.push(p.as_ref().len() as i64);
    }
    Ok(Prompts { tokens, lengths, n })
}

struct StreamState<'a> {
    on_token: &'a mut dyn FnMut(usize, i32),
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn on_token_trampoline(user: *mut c_void, prompt_index: i32, token: i32) {
    // SAFETY: `user` is the &mut StreamState that generate_stream passed, alive for the call.
    let state = &mut *(user as *mut StreamState<'_>);
    if state.panic.is_some() {
        return;
    }
    let f = &mut state.on_token;
    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| f(prompt_index as usize, token))) {
        state.panic = Some(p);
    }
}

impl Engine {
    /// `mesh`: `None` (this process alone) or a mesh whose axes above 1 are "dp" and "tp".
    /// Options: "micro_batches", "max_grad_norm", "schedule", "zero", ... (see dtrain.h).
    pub fn new(
        mesh: Option<&Mesh>,
        model: &Model,
        optimizer: &Optimizer,
        options: &Pairs,
    ) -> Result<Engine> {
        let pm = match mesh {
            Some(m) => m.raw()?,
            None => ptr::null_mut(),
        };
        let (pmod, popt) = (model.raw()?, optimizer.raw()?);
        let opts = CallOptions::new(options)?;
        let mut fams = vec![model.family(), optimizer.family()];
        fams.extend(mesh.map(Mesh::family));
        let p = {
            let _g = lock(&fams);
            create!(sys::dt_engine, |out| sys::dt_engine_create(
                pm,
                pmod,
                popt,
                opts.ptr(),
                &mut out
            ))
        };
        Ok(Engine {
            ptr: p,
            model_fam: model.family().clone(),
            mesh_fam: mesh.map(|m| m.family().clone()),
        })
    }

    /// Releases the engine now. Idempotent; dropping does the same. Later calls fail with
    /// `Status::INVALID_ARGUMENT`.
    pub fn close(&mut self) {
        let p = std::mem::replace(&mut self.ptr, ptr::null_mut());
        if !p.is_null() {
            // SAFETY: owned, released exactly once.
            unsafe { sys::dt_engine_destroy(p) }
        }
    }

    pub fn is_closed(&self) -> bool {
        self.ptr.is_null()
    }

    /// The raw C handle (NULL once closed); it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dt_engine {
        self.ptr
    }

    fn raw(&self) -> Result<*mut sys::dt_engine> {
        if self.ptr.is_null() {
            Err(Error::closed("Engine"))
        } else {
            Ok(self.ptr)
        }
    }

    fn lock_with<'a>(&'a self, tensors: &[&'a Tensor]) -> Locked<'a> {
        let mut fams: Vec<&Family> = vec![&self.model_fam];
        fams.extend(self.mesh_fam.as_ref());
        fams.extend(tensors.iter().map(|t| t.family()));
        lock(&fams)
    }

    /// One optimizer step on a batch of i32 [B, T] CPU tensors; returns the mean loss over
    /// the batch before the update.
    pub fn train_step(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f64> {
        let (p, pi, pt) = (self.raw()?, inputs.raw()?, targets.raw()?);
        let _g = self.lock_with(&[inputs, targets]);
        let mut loss = 0f64;
        // SAFETY: live handles, valid out-pointer.
        check(unsafe { sys::dt_engine_train_step(p, pi, pt, &mut loss) })?;
        Ok(loss)
    }

    /// The mean loss of a batch without changing anything.
    pub fn eval(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f64> {
        let (p, pi, pt) = (self.raw()?, inputs.raw()?, targets.raw()?);
        let _g = self.lock_with(&[inputs, targets]);
        let mut loss = 0f64;
        // SAFETY: live handles, valid out-pointer.
        check(unsafe { sys::dt_engine_eval(p, pi, pt, &mut loss) })?;
        Ok(loss)
    }

    /// Continues each prompt (token ids); returns every prompt's new tokens. Options:
    /// "max_new_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
    /// "stop_token".
    pub fn generate<P: AsRef<[i32]>>(
        &mut self,
        prompts: &[P],
        options: &Pairs,
    ) -> Result<Vec<Vec<i32>>> {
        self.generate_impl(prompts, options, None)
    }

    /// [`Engine::generate`], calling `on_token(prompt_index, token)` with every new token as
    /// soon as it is chosen (on this thread). The callback must not use the engine's model,
    /// optimizer or mesh handles (it would wait forever on their lock); a panic in it is
    /// re-raised once generation returns.
    pub fn generate_stream<P: AsRef<[i32]>>(
        &mut self,
        prompts: &[P],
        options: &Pairs,
        mut on_token: impl FnMut(usize, i32),
    ) -> Result<Vec<Vec<i32>>> {
        let mut state = StreamState {
            on_token: &mut on_token,
            panic: None,
        };
        let result = self.generate_impl(prompts, options, Some(&mut state));
        if let Some(p) = state.panic {
            panic::resume_unwind(p);
        }
        result
    }

    fn generate_impl<P: AsRef<[i32]>>(
        &mut self,
        prompts: &[P],
        options: &Pairs,
        stream: Option<&mut StreamState<'_>>,
    ) -> Result<Vec<Vec<i32>>> {
        let p = self.raw()?;
        let pr = flatten(prompts)?;
        let opts = CallOptions::new(options)?;
        // Room for max_new_tokens per prompt; when it is missing or of the wrong type, the
        // default (the library rejects a wrong type itself).
        let cap = find_int(options, "max_new_tokens")
            .unwrap_or(DEFAULT_MAX_NEW_TOKENS)
            .clamp(1, MAX_GENERATE_CAPACITY);
        let rows = prompts.len().max(1);
        // Many prompts times the capacity can still exceed memory: an Err, never an abort.
        let total = rows.checked_mul(cap as usize).ok_or_else(|| {
            Error::invalid("dtrain: generate: prompts x max_new_tokens overflows")
        })?;
        let mut out: Vec<i32> = Vec::new();
        out.try_reserve_exact(total).map_err(|_| {
            Error::invalid(
                "dtrain: generate: cannot allocate the output for prompts x max_new_tokens",
            )
        })?;
        out.resize(total, 0);
        let mut lengths = vec![0i64; rows];
        let _g = self.lock_with(&[]);
        // SAFETY: the buffers hold n prompts' tokens and lengths, and n rows of `cap` out
        // tokens plus n lengths; `state` outlives the call.
        let status = unsafe {
            match stream {
                None => sys::dt_engine_generate(
                    p,
                    pr.tokens.as_ptr(),
                    pr.lengths.as_ptr(),
                    pr.n,
                    opts.ptr(),
                    out.as_mut_ptr(),
                    cap,
                    lengths.as_mut_ptr(),
                ),
                Some(state) => sys::dt_engine_generate_stream(
                    p,
                    pr.tokens.as_ptr(),
                    pr.lengths.as_ptr(),
                    pr.n,
                    opts.ptr(),
                    Some(on_token_trampoline),
                    state as *mut StreamState<'_> as *mut c_void,
                    out.as_mut_ptr(),
                    cap,
                    lengths.as_mut_ptr(),
                ),
            }
        };
        check(status)?;
        Ok((0..prompts.len())
            .map(|i| {
                let start = i * cap as usize;
                let len = (lengths[i].clamp(0, cap)) as usize;
                out[start..start + len].to_vec()
            })
            .collect())
    }

    /// Saves parameters and optimizer state as "<stem>.index.json" plus a data file.
    pub fn save(&mut self, path_stem: impl AsRef<Path>) -> Result<()> {
        let p = self.raw()?;
        let stem = path_cstring(path_stem.as_ref())?;
        let _g = self.lock_with(&[]);
        // SAFETY: live handle, valid string.
        check(unsafe { sys::dt_engine_save(p, stem.as_ptr()) })
    }

    /// Loads what [`Engine::save`] wrote; on failure nothing changed (`Status::IO` for a
    /// missing or corrupt file).
    pub fn load(&mut self, path_stem: impl AsRef<Path>) -> Result<()> {
        let p = self.raw()?;
        let stem = path_cstring(path_stem.as_ref())?;
        let _g = self.lock_with(&[]);
        // SAFETY: live handle, valid string.
        check(unsafe { sys::dt_engine_load(p, stem.as_ptr()) })
    }

    /// Optimizer steps taken so far (restored by load).
    pub fn step(&self) -> Result<i64> {
        let p = self.raw()?;
        let _g = self.lock_with(&[]);
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_engine_step(p, &mut n) })?;
        Ok(n)
    }

    /// The last train step's metrics as one JSON line ("" before any step).
    pub fn last_stats_json(&self) -> Result<String> {
        let p = self.raw()?;
        let _g = self.lock_with(&[]);
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes.
        read_json(|buf, cap, needed| unsafe { sys::dt_engine_last_stats_json(p, buf, cap, needed) })
    }

    /// The last generate's statistics as JSON ("" before any).
    pub fn last_generate_stats_json(&self) -> Result<String> {
        let p = self.raw()?;
        let _g = self.lock_with(&[]);
        // SAFETY: as above.
        read_json(|buf, cap, needed| unsafe {
            sys::dt_engine_last_generate_stats_json(p, buf, cap, needed)
        })
    }
}
