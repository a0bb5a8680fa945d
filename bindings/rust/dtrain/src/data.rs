//! Datasets of fixed-length examples and seeded batch loaders.
use dtrain_sys as sys;

use crate::error::{check, Error, Result};
use crate::handle::{create, handle, lock, Family};
use crate::options::{cstring, find_int, CallOptions, Pairs};
use crate::tensor::{DType, Tensor};
use crate::{to_usize, try_filled};

handle!(
    /// Fixed-length examples (`dt_dataset`): `context` input tokens and their targets.
    /// Immutable once made, so it is also `Sync` (the C docs let distinct threads read one
    /// dataset). Loaders keep the data alive.
    Dataset, sys::dt_dataset, sys::dt_dataset_destroy, "Dataset"
);

// SAFETY: a dataset is immutable after creation; the C docs allow concurrent reads.
unsafe impl Sync for Dataset {}

impl Dataset {
    /// `kind`: "text" ("path", "context"), "tokens" ("path", "context", "width",
    /// "vocab_size") or "addition" ("digits", "size", "seed", "split").
    pub fn new(kind: &str, options: &Pairs) -> Result<Dataset> {
        let k = cstring(kind, "dataset kind")?;
        let opts = CallOptions::new(options)?;
        let p = create!(sys::dt_dataset, |out| sys::dt_dataset_create(
            k.as_ptr(),
            opts.ptr(),
            &mut out
        ));
        Ok(Dataset::from_raw(p, Family::new()))
    }

    /// Number of examples.
    pub fn size(&self) -> Result<usize> {
        let p = self.raw()?;
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_dataset_size(p, &mut n) })?;
        to_usize(n, "dataset size")
    }

    /// Tokens per example (the T of [B, T] batches).
    pub fn context(&self) -> Result<usize> {
        let p = self.raw()?;
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_dataset_context(p, &mut n) })?;
        to_usize(n, "context")
    }

    /// Example `index`: (inputs, targets), `context` tokens each.
    pub fn example(&self, index: usize) -> Result<(Vec<i32>, Vec<i32>)> {
        let t = self.context()?;
        let p = self.raw()?;
        let i =
            i64::try_from(index).map_err(|_| Error::invalid("dtrain: example index too large"))?;
        let mut inputs = try_filled(t, 0i32, "an example")?;
        let mut targets = try_filled(t, 0i32, "an example")?;
        // SAFETY: both buffers hold `context` tokens.
        check(unsafe { sys::dt_dataset_example(p, i, inputs.as_mut_ptr(), targets.as_mut_ptr()) })?;
        Ok((inputs, targets))
    }
}

handle!(
    /// Batches of a dataset in a seeded order (`dt_loader`); keeps the dataset alive.
    ///
    /// An [`Iterator`] over `Result<(inputs, targets)>` batches, fresh i32 [batch, context]
    /// tensors each time. It never ends (epochs follow one another, each a new permutation),
    /// so bound it: `loader.by_ref().take(n)`, or one epoch with
    /// `take(loader.batches_per_epoch()?)`. [`Loader::next_into`] refills tensors you keep.
    ///
    /// ```no_run
    /// # fn demo(engine: &mut dtrain::Engine, data: &dtrain::Dataset) -> dtrain::Result<()> {
    /// let mut loader = dtrain::Loader::new(data, &[("batch", 16.into())])?;
    /// for batch in loader.by_ref().take(30) {
    ///     let (x, y) = batch?;
    ///     engine.train_step(&x, &y)?;
    /// }
    /// # Ok(()) }
    /// ```
    Loader, sys::dt_loader, sys::dt_loader_destroy, "Loader",
    shape: [i64; 2]
);

impl Loader {
    /// Options: "batch" (required), "seed", "shuffle".
    pub fn new(dataset: &Dataset, options: &Pairs) -> Result<Loader> {
        let d = dataset.raw()?;
        let opts = CallOptions::new(options)?;
        let p = create!(sys::dt_loader, |out| sys::dt_loader_create(
            d,
            opts.ptr(),
            &mut out
        ));
        // The library accepted "batch" as an int, so it is there.
        let batch = find_int(options, "batch").unwrap_or(0);
        let context = i64::try_from(dataset.context()?).unwrap_or(i64::MAX);
        Ok(Loader::from_raw(p, Family::new(), [batch, context]))
    }

    /// The shape of its batches: [batch, context].
    pub fn batch_shape(&self) -> [i64; 2] {
        self.shape
    }

    /// Writes the next batch into i32 CPU tensors [batch, context], then advances.
    pub fn next_into(&mut self, inputs: &mut Tensor, targets: &mut Tensor) -> Result<()> {
        let (p, pi, pt) = (self.raw()?, inputs.raw()?, targets.raw()?);
        let _g = lock(&[&self.fam, inputs.family(), targets.family()]);
        // SAFETY: live handles.
        check(unsafe { sys::dt_loader_next(p, pi, pt) })
    }

    fn next_batch(&mut self) -> Result<(Tensor, Tensor)> {
        self.raw()?;
        let mut x = Tensor::new(DType::I32, &self.shape)?;
        let mut y = Tensor::new(DType::I32, &self.shape)?;
        self.next_into(&mut x, &mut y)?;
        Ok((x, y))
    }

    /// Full batches per epoch.
    pub fn batches_per_epoch(&self) -> Result<i64> {
        let p = self.raw()?;
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_loader_batches_per_epoch(p, &mut n) })?;
        Ok(n)
    }

    /// Where the next batch comes from: (epoch, batch index within it).
    pub fn position(&self) -> Result<(i64, i64)> {
        let p = self.raw()?;
        let (mut e, mut b) = (0i64, 0i64);
        // SAFETY: live handle, valid out-pointers.
        check(unsafe { sys::dt_loader_position(p, &mut e, &mut b) })?;
        Ok((e, b))
    }

    /// Moves to batch `batch_index` of `epoch`.
    pub fn seek(&mut self, epoch: i64, batch_index: i64) -> Result<()> {
        let p = self.raw()?;
        // SAFETY: live handle.
        check(unsafe { sys::dt_loader_seek(p, epoch, batch_index) })
    }
}

impl Iterator for Loader {
    type Item = Result<(Tensor, Tensor)>;

    /// The next batch as new tensors; `Some(Err)` when it cannot be made (a closed loader),
    /// never `None`.
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_batch())
    }
}
