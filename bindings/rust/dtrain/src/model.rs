//! Models with named parameters, optimizers, and the host-driven training loop.
use std::os::raw::c_char;
use std::path::Path;
use std::ptr;

use dtrain_sys as sys;

use crate::error::{check, owned_str, Error, Result};
use crate::handle::{create, handle, lock, Family};
use crate::options::{cstring, CallOptions, Pairs};
use crate::tensor::Tensor;
use crate::{path_cstring, to_usize};

handle!(
    /// A model (`dt_module`): a GPT, an MLP or a sequential container. Optimizers, engines
    /// and parameter views made from it keep it alive, so it may be closed first.
    Model, sys::dt_module, sys::dt_module_destroy, "Model"
);

impl Model {
    fn make(f: impl FnOnce(*mut *mut sys::dt_module) -> sys::dt_status) -> Result<Model> {
        let mut out: *mut sys::dt_module = ptr::null_mut();
        check(f(&mut out))?;
        if out.is_null() {
            return Err(Error::new(
                crate::Status::INTERNAL,
                "dtrain: a create call returned NULL",
            ));
        }
        Ok(Model::from_raw(out, Family::new()))
    }

    /// A GPT (`dt_module_create_gpt`). Config keys: "preset" ("gpt-tiny", "gpt-small",
    /// "llama-tiny"), "vocab_size", "context", "n_layer", "n_head", "d_model", "seed",
    /// "precision", ... (see dtrain.h). `&[]`: the "gpt-small" shape.
    pub fn gpt(config: &Pairs) -> Result<Model> {
        let opts = CallOptions::new(config)?;
        // SAFETY: valid options (or NULL) and out-pointer.
        Model::make(|out| unsafe { sys::dt_module_create_gpt(opts.ptr(), out) })
    }

    /// Number of parameters [`Model::gpt`] would make with `config`, counted from the config
    /// without building the model or allocating: size a model first, even one this machine
    /// could not hold. The same keys and errors as [`Model::gpt`].
    pub fn gpt_param_count(config: &Pairs) -> Result<usize> {
        let opts = CallOptions::new(config)?;
        let mut n = 0i64;
        // SAFETY: valid options (or NULL) and out-pointer.
        check(unsafe { sys::dt_module_gpt_param_count(opts.ptr(), &mut n) })?;
        to_usize(n, "parameter count")
    }

    /// An MLP: "sizes" ("in,hidden...,out"), "act", "seed".
    pub fn mlp(config: &Pairs) -> Result<Model> {
        let opts = CallOptions::new(config)?;
        // SAFETY: as above.
        Model::make(|out| unsafe { sys::dt_module_create_mlp(opts.ptr(), out) })
    }

    /// A sequential container: "layers" ("linear:4:32,gelu,..."), "seed", "init_std".
    pub fn sequential(config: &Pairs) -> Result<Model> {
        let opts = CallOptions::new(config)?;
        // SAFETY: as above.
        Model::make(|out| unsafe { sys::dt_module_create_sequential(opts.ptr(), out) })
    }

    /// The GPT a checkpoint was saved from, freshly initialized (load its weights with
    /// [`crate::Engine::load`]).
    pub fn from_checkpoint(path_stem: impl AsRef<Path>) -> Result<Model> {
        let stem = path_cstring(path_stem.as_ref())?;
        // SAFETY: valid string and out-pointer.
        Model::make(|out| unsafe { sys::dt_module_create_from_checkpoint(stem.as_ptr(), out) })
    }

    /// Number of scalar parameters.
    pub fn param_count(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_module_param_count(p, &mut n) })?;
        to_usize(n, "parameter count")
    }

    /// Number of parameter tensors.
    pub fn param_tensor_count(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_module_param_count_tensors(p, &mut n) })?;
        to_usize(n, "parameter tensor count")
    }

    /// The parameter tensors' names, in the model's fixed order.
    pub fn param_names(&self) -> Result<Vec<String>> {
        let n = self.param_tensor_count()?;
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        (0..n)
            .map(|i| {
                let mut s: *const c_char = ptr::null();
                // SAFETY: live handle, index in range; the name is copied at once.
                check(unsafe { sys::dt_module_param_name(p, i as i64, &mut s) })?;
                Ok(unsafe { owned_str(s) })
            })
            .collect()
    }

    /// A tensor viewing parameter `name` (reads see the current weights; copies into it
    /// write them). Keeps the model alive.
    pub fn param(&self, name: &str) -> Result<Tensor> {
        let p = self.raw()?;
        let n = cstring(name, "parameter name")?;
        let _g = lock(&[&self.fam]);
        let t = create!(sys::dt_tensor, |out| sys::dt_module_param(
            p,
            n.as_ptr(),
            &mut out
        ));
        Ok(Tensor::from_raw(t, self.fam.clone()))
    }

    /// Forward of a sequential or MLP model: `x` f32 [N, in] -> a new [N, out] tensor.
    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let (p, px) = (self.raw()?, x.raw()?);
        let _g = lock(&[&self.fam, x.family()]);
        let y = create!(sys::dt_tensor, |out| sys::dt_module_forward(
            p, px, &mut out
        ));
        Ok(Tensor::from_raw(y, Family::new()))
    }

    /// Backward of the last forward from `dy`; gradients accumulate. Returns the input's
    /// gradient [N, in].
    pub fn backward(&mut self, dy: &Tensor) -> Result<Tensor> {
        let (p, pdy) = (self.raw()?, dy.raw()?);
        let _g = lock(&[&self.fam, dy.family()]);
        let dx = create!(sys::dt_tensor, |out| sys::dt_module_backward(
            p, pdy, &mut out
        ));
        Ok(Tensor::from_raw(dx, Family::new()))
    }

    /// [`Model::backward`] without computing the input's gradient.
    pub fn backward_params(&mut self, dy: &Tensor) -> Result<()> {
        let (p, pdy) = (self.raw()?, dy.raw()?);
        let _g = lock(&[&self.fam, dy.family()]);
        // SAFETY: live handles; dx NULL is allowed.
        check(unsafe { sys::dt_module_backward(p, pdy, ptr::null_mut()) })
    }

    /// Sets every parameter's gradient to zero.
    pub fn zero_grad(&mut self) -> Result<()> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle.
        check(unsafe { sys::dt_module_zero_grad(p) })
    }
}

/// A loss and its gradient (`dt_loss`): kind "mse" or "cross_entropy". Returns the mean
/// loss and d loss / d pred.
pub fn loss(kind: &str, pred: &Tensor, target: &Tensor) -> Result<(f64, Tensor)> {
    let k = cstring(kind, "loss kind")?;
    let (pp, pt) = (pred.raw()?, target.raw()?);
    let _g = lock(&[pred.family(), target.family()]);
    let mut value = 0f64;
    let d = create!(sys::dt_tensor, |out| sys::dt_loss(
        k.as_ptr(),
        pp,
        pt,
        &mut value,
        &mut out
    ));
    Ok((value, Tensor::from_raw(d, Family::new())))
}

handle!(
    /// Updates the parameters of one model (`dt_optimizer`); keeps the model alive.
    Optimizer, sys::dt_optimizer, sys::dt_optimizer_destroy, "Optimizer"
);

impl Optimizer {
    /// `kind`: "adamw" ("lr", "beta1", "beta2", "eps", "weight_decay") or "sgd" ("lr",
    /// "momentum", "weight_decay", "nesterov").
    pub fn new(model: &Model, kind: &str, options: &Pairs) -> Result<Optimizer> {
        let m = model.raw()?;
        let k = cstring(kind, "optimizer kind")?;
        let opts = CallOptions::new(options)?;
        let _g = lock(&[model.family()]);
        let p = create!(sys::dt_optimizer, |out| sys::dt_optimizer_create(
            m,
            k.as_ptr(),
            opts.ptr(),
            &mut out
        ));
        Ok(Optimizer::from_raw(p, model.family().clone()))
    }

    /// One update from the accumulated gradients (host-driven loops; engines step themselves).
    pub fn step(&mut self) -> Result<()> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle.
        check(unsafe { sys::dt_optimizer_step(p) })
    }

    /// Sets the learning rate of the following steps.
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle.
        check(unsafe { sys::dt_optimizer_set_lr(p, lr) })
    }
}
