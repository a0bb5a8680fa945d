//! The training engine: train steps, evaluation, generation and checkpoints.
use std::any::Any;
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use dtrain_sys as sys;

use crate::cancel::CancelToken;
use crate::error::{check, Error, Result};
use crate::handle::{create, lock, Family, Locked};
use crate::mesh::Mesh;
use crate::model::{Model, Optimizer};
use crate::options::{find_int, CallOptions, Pairs};
use crate::tensor::Tensor;
use crate::{path_cstring, read_json, try_filled, try_with_capacity};

/// Owns the C engine. Shared (through an `Arc`) by the [`Engine`] and the worker thread of
/// a [`crate::TokenStream`], so that a stream that is leaked instead of dropped can never
/// see the engine released under it: the last owner releases it.
pub(crate) struct EngineRef(*mut sys::dt_engine);

// SAFETY: every use of the pointer holds the family locks of the engine's model and mesh
// (see handle.rs), whichever thread it runs on.
unsafe impl Send for EngineRef {}
unsafe impl Sync for EngineRef {}

impl EngineRef {
    pub(crate) fn ptr(&self) -> *mut sys::dt_engine {
        self.0
    }
}

impl Drop for EngineRef {
    fn drop(&mut self) {
        // SAFETY: owned, released exactly once (by the last owner).
        unsafe { sys::dt_engine_destroy(self.0) }
    }
}

/// Trains a GPT with an optimizer of it (`dt_engine`), data parallel over a mesh or alone.
/// Keeps the mesh, model and optimizer alive, so they may be closed first.
pub struct Engine {
    raw: Option<Arc<EngineRef>>,
    model_fam: Family,
    mesh_fam: Option<Family>,
    // Send but not Sync, like the other handles (one thread at a time).
    _not_sync: PhantomData<Cell<()>>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.raw {
            None => write!(f, "Engine(closed)"),
            Some(r) => write!(f, "Engine({:p})", r.ptr()),
        }
    }
}

/// Default capacity per prompt when the options do not say "max_new_tokens".
const DEFAULT_MAX_NEW_TOKENS: i64 = 16;
/// Bounds what generate allocates per prompt for an absurd "max_new_tokens", which the
/// library then rejects (it must fit the context), as the Go and Java bindings do.
const MAX_GENERATE_CAPACITY: i64 = 1 << 20;

/// Prompts as the C calls take them: every prompt's tokens end to end, and their lengths.
pub(crate) struct Prompts {
    pub(crate) tokens: Vec<i32>,
    pub(crate) lengths: Vec<i64>,
    pub(crate) n: i32,
}

pub(crate) fn flatten<P: AsRef<[i32]>>(prompts: &[P]) -> Result<Prompts> {
    let n = i32::try_from(prompts.len()).map_err(|_| Error::invalid("dtrain: too many prompts"))?;
    // The same slice may be passed many times: the total can exceed memory, or usize.
    let total = prompts
        .iter()
        .try_fold(0usize, |acc, p| acc.checked_add(p.as_ref().len()))
        .ok_or_else(|| Error::invalid("dtrain: the prompts' total length overflows"))?;
    let mut tokens: Vec<i32> = try_with_capacity(total, "the prompts' tokens")?;
    let mut lengths: Vec<i64> = try_with_capacity(prompts.len(), "the prompt lengths")?;
    for p in prompts {
        tokens.extend_from_slice(p.as_ref());
        // A slice's length fits isize, so i64.
        lengths.push(p.as_ref().len() as i64);
    }
    Ok(Prompts { tokens, lengths, n })
}

/// Where generate writes: `rows` rows of `cap` tokens and their lengths.
pub(crate) struct Outputs {
    pub(crate) tokens: Vec<i32>,
    pub(crate) lengths: Vec<i64>,
    pub(crate) cap: i64,
}

impl Outputs {
    /// Room for "max_new_tokens" (or the default) per prompt. A missing or mistyped value
    /// takes the default (the library rejects a wrong type itself), and a huge one is
    /// capped: the library rejects it too (it must fit the context).
    pub(crate) fn new(n_prompts: usize, options: &Pairs) -> Result<Outputs> {
        if i32::try_from(n_prompts).is_err() {
            return Err(Error::invalid("dtrain: too many prompts"));
        }
        let cap = find_int(options, "max_new_tokens")
            .unwrap_or(DEFAULT_MAX_NEW_TOKENS)
            .clamp(1, MAX_GENERATE_CAPACITY);
        let rows = n_prompts.max(1);
        // Many prompts times the capacity can still exceed memory: an Err, never an abort.
        let total = rows.checked_mul(cap as usize).ok_or_else(|| {
            Error::invalid("dtrain: generate: prompts x max_new_tokens overflows")
        })?;
        Ok(Outputs {
            tokens: try_filled(total, 0, "the output for prompts x max_new_tokens")?,
            lengths: try_filled(rows, 0, "the output lengths")?,
            cap,
        })
    }

    fn rows(&self, n: usize) -> Vec<Vec<i32>> {
        let cap = self.cap as usize;
        (0..n)
            .map(|i| {
                let start = i * cap;
                let len = self.lengths[i].clamp(0, self.cap) as usize;
                self.tokens[start..start + len].to_vec()
            })
            .collect()
    }
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

/// Attaches a cancel token to an engine for one call; detaches when dropped.
pub(crate) struct Attached(*mut sys::dt_engine);

impl Attached {
    /// `p` must be live and stay so, under the engine's locks, until this is dropped.
    pub(crate) unsafe fn new(p: *mut sys::dt_engine, token: &CancelToken) -> Result<Attached> {
        check(sys::dt_engine_set_cancel(p, token.raw()))?;
        Ok(Attached(p))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // SAFETY: see new. Detaching a live engine cannot fail.
        unsafe { sys::dt_engine_set_cancel(self.0, ptr::null_mut()) };
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
            raw: Some(Arc::new(EngineRef(p))),
            model_fam: model.family().clone(),
            mesh_fam: mesh.map(|m| m.family().clone()),
            _not_sync: PhantomData,
        })
    }

    /// Releases the engine now. Idempotent; dropping does the same. Later calls fail with
    /// `Status::INVALID_ARGUMENT`.
    pub fn close(&mut self) {
        // The C engine goes with the last owner: this one, or a leaked stream's worker.
        self.raw = None;
    }

    pub fn is_closed(&self) -> bool {
        self.raw.is_none()
    }

    /// The raw C handle (NULL once closed); it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dt_engine {
        self.raw.as_ref().map_or(ptr::null_mut(), |r| r.ptr())
    }

    fn raw(&self) -> Result<*mut sys::dt_engine> {
        self.raw
            .as_ref()
            .map(|r| r.ptr())
            .ok_or_else(|| Error::closed("Engine"))
    }

    /// What a [`crate::TokenStream`]'s worker needs: an owner of the C engine and the
    /// families to lock.
    pub(crate) fn share(&self) -> Result<(Arc<EngineRef>, Vec<Family>)> {
        let raw = self.raw.clone().ok_or_else(|| Error::closed("Engine"))?;
        let mut fams = vec![self.model_fam.clone()];
        fams.extend(self.mesh_fam.clone());
        Ok((raw, fams))
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
        self.batch_call(inputs, targets, None, sys::dt_engine_train_step)
    }

    /// [`Engine::train_step`] that stops when `cancel` is raised (from any thread):
    /// `Err` with `Status::CANCELLED`, and nothing changed (no update, the step count as
    /// before), so the next step works. Already raised, it fails at once.
    pub fn train_step_cancellable(
        &mut self,
        inputs: &Tensor,
        targets: &Tensor,
        cancel: &CancelToken,
    ) -> Result<f64> {
        self.batch_call(inputs, targets, Some(cancel), sys::dt_engine_train_step)
    }

    /// The mean loss of a batch without changing anything.
    pub fn eval(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f64> {
        self.batch_call(inputs, targets, None, sys::dt_engine_eval)
    }

    /// [`Engine::eval`] that stops when `cancel` is raised (`Status::CANCELLED`).
    pub fn eval_cancellable(
        &mut self,
        inputs: &Tensor,
        targets: &Tensor,
        cancel: &CancelToken,
    ) -> Result<f64> {
        self.batch_call(inputs, targets, Some(cancel), sys::dt_engine_eval)
    }

    fn batch_call(
        &mut self,
        inputs: &Tensor,
        targets: &Tensor,
        cancel: Option<&CancelToken>,
        f: unsafe extern "C" fn(
            *mut sys::dt_engine,
            *const sys::dt_tensor,
            *const sys::dt_tensor,
            *mut f64,
        ) -> sys::dt_status,
    ) -> Result<f64> {
        let (p, pi, pt) = (self.raw()?, inputs.raw()?, targets.raw()?);
        let _g = self.lock_with(&[inputs, targets]);
        // SAFETY: a live engine under its locks until `_attached` detaches.
        let _attached = match cancel {
            Some(c) => Some(unsafe { Attached::new(p, c)? }),
            None => None,
        };
        let mut loss = 0f64;
        // SAFETY: live handles, valid out-pointer. The status is read before detaching.
        check(unsafe { f(p, pi, pt, &mut loss) })?;
        Ok(loss)
    }

    /// Continues each prompt (token ids); returns every prompt's new tokens. Options:
    /// "max_new_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
    /// "stop_token", "stop_tokens" (ids: `vec![3, 7].into()`, such as a tokenizer's
    /// end-of-sequence ids, or "3,7"; a prompt ends after emitting one of them).
    pub fn generate<P: AsRef<[i32]>>(
        &mut self,
        prompts: &[P],
        options: &Pairs,
    ) -> Result<Vec<Vec<i32>>> {
        self.generate_impl(prompts, options, None, None)
    }

    /// [`Engine::generate`] that stops when `cancel` is raised: `Err` with
    /// `Status::CANCELLED` within one decode step.
    pub fn generate_cancellable<P: AsRef<[i32]>>(
        &mut self,
        prompts: &[P],
        options: &Pairs,
        cancel: &CancelToken,
    ) -> Result<Vec<Vec<i32>>> {
        self.generate_impl(prompts, options, None, Some(cancel))
    }

    /// [`Engine::generate`], calling `on_token(prompt_index, token)` with every new token as
    /// soon as it is chosen (on this thread). The callback must not use the engine's model,
    /// optimizer or mesh handles (it would wait forever on their lock); a panic in it is
    /// re-raised once generation returns. To stop early, iterate [`Engine::stream`] instead.
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
        let result = self.generate_impl(prompts, options, Some(&mut state), None);
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
        cancel: Option<&CancelToken>,
    ) -> Result<Vec<Vec<i32>>> {
        let p = self.raw()?;
        // The output first: for many prompts it is the larger, so it fails first.
        let mut out = Outputs::new(prompts.len(), options)?;
        let pr = flatten(prompts)?;
        let opts = CallOptions::new(options)?;
        let _g = self.lock_with(&[]);
        // SAFETY: a live engine under its locks until `_attached` detaches.
        let _attached = match cancel {
            Some(c) => Some(unsafe { Attached::new(p, c)? }),
            None => None,
        };
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
                    out.tokens.as_mut_ptr(),
                    out.cap,
                    out.lengths.as_mut_ptr(),
                ),
                Some(state) => sys::dt_engine_generate_stream(
                    p,
                    pr.tokens.as_ptr(),
                    pr.lengths.as_ptr(),
                    pr.n,
                    opts.ptr(),
                    Some(on_token_trampoline),
                    state as *mut StreamState<'_> as *mut c_void,
                    out.tokens.as_mut_ptr(),
                    out.cap,
                    out.lengths.as_mut_ptr(),
                ),
            }
        };
        check(status)?;
        Ok(out.rows(prompts.len()))
    }

    /// Saves parameters and optimizer state as `<stem>.index.json` plus a data file.
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

    /// Writes the engine's current weights as a Hugging Face directory, as
    /// [`Model::save_hf`] does (the same options), gathered first under tp, pp, dp or ZeRO
    /// (collective: under mpirun every process calls it, and rank 0 writes).
    pub fn save_hf(&mut self, dir: impl AsRef<Path>, options: &Pairs) -> Result<()> {
        let p = self.raw()?;
        let d = path_cstring(dir.as_ref())?;
        let opts = CallOptions::new(options)?;
        let _g = self.lock_with(&[]);
        // SAFETY: live handle under its locks, valid string and options.
        check(unsafe { sys::dt_engine_save_hf(p, d.as_ptr(), opts.ptr()) })
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
