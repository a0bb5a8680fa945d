//! Tensors and the operations on them.
use std::os::raw::{c_char, c_void};
use std::ptr;

use dtrain_sys as sys;

use crate::error::{check, owned_str, static_str, Error, Result};
use crate::handle::{create, handle, lock, Family};
use crate::options::{cstring, CallOptions, Pairs};
use crate::{to_usize, try_filled};

/// Element types (`dt_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    BF16,
    F16,
    I32,
    I64,
}

impl DType {
    /// The C code (`DT_F32`, ...).
    pub fn code(self) -> i32 {
        (match self {
            DType::F32 => sys::DT_F32,
            DType::BF16 => sys::DT_BF16,
            DType::F16 => sys::DT_F16,
            DType::I32 => sys::DT_I32,
            DType::I64 => sys::DT_I64,
        }) as i32
    }

    /// The dtype of a C code, if this crate knows it.
    pub fn from_code(code: i32) -> Option<DType> {
        [DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64]
            .into_iter()
            .find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        // SAFETY: pure function of an integer.
        unsafe { sys::dt_dtype_size(self.code()) }
    }

    /// "f32", "bf16", "f16", "i32" or "i64".
    pub fn name(self) -> &'static str {
        // SAFETY: returns a static string.
        unsafe { static_str(sys::dt_dtype_name(self.code())) }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

/// A host element type that a tensor of the matching dtype copies to and from.
pub trait Element: Copy + Default + Send + Sync + sealed::Sealed + 'static {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}

handle!(
    /// A dense, row-major n-dimensional array (`dt_tensor`), on the CPU unless made with
    /// [`Tensor::on_device`]. A mesh tensor ([`crate::Mesh::tensor`]) holds one piece per
    /// local rank; [`Tensor::piece`] views one.
    Tensor, sys::dt_tensor, sys::dt_tensor_destroy, "Tensor"
);

/// Frees a vector lent by [`Tensor::from_vec`] (called by the library, on any thread).
unsafe extern "C" fn release_vec<T: Element>(owner: *mut c_void) {
    // SAFETY: `owner` is the Box<Vec<T>> from_vec leaked, given back exactly once.
    drop(Box::from_raw(owner as *mut Vec<T>));
    #[cfg(test)]
    tests::RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// The element count of `shape`, checked: negative sizes and overflow are errors.
fn checked_numel(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d)
            .ok()
            .and_then(|d| acc.checked_mul(d))
            .ok_or_else(|| Error::invalid(format!("dtrain: bad or overflowing shape {shape:?}")))
    })
}

fn ndim_of(shape: &[i64]) -> Result<i32> {
    i32::try_from(shape.len()).map_err(|_| Error::invalid("dtrain: too many dims"))
}

pub(crate) fn shape_ptr(shape: &[i64]) -> *const i64 {
    if shape.is_empty() {
        ptr::null()
    } else {
        shape.as_ptr()
    }
}

impl Tensor {
    /// A zero-filled CPU tensor of `shape` (empty: a scalar).
    pub fn new(dtype: DType, shape: &[i64]) -> Result<Tensor> {
        Tensor::on_device(dtype, shape, "cpu", &[])
    }

    /// A zero-filled tensor on `device` ("cpu" or "cuda:N"); options: "tag".
    pub fn on_device(dtype: DType, shape: &[i64], device: &str, options: &Pairs) -> Result<Tensor> {
        let dev = cstring(device, "device")?;
        let opts = CallOptions::new(options)?;
        let nd = ndim_of(shape)?;
        let p = create!(sys::dt_tensor, |out| sys::dt_tensor_create(
            dtype.code(),
            shape_ptr(shape),
            nd,
            dev.as_ptr(),
            opts.ptr(),
            &mut out
        ));
        Ok(Tensor::from_raw(p, Family::new()))
    }

    /// A CPU tensor over `data`'s memory, without a copy: the tensor owns the vector and
    /// frees it when the library is done with it (the last handle viewing it dropped).
    /// `data.len()` must be the shape's element count (`Status::INVALID_ARGUMENT`
    /// otherwise). Read and write it in place with [`Tensor::as_slice`] and
    /// [`Tensor::as_mut_slice`].
    pub fn from_vec<T: Element>(mut data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        let numel = checked_numel(shape)?;
        if numel != data.len() {
            return Err(Error::invalid(format!(
                "dtrain: the shape {shape:?} has {numel} elements, the vector {}",
                data.len()
            )));
        }
        let nd = ndim_of(shape)?;
        let dev = cstring("cpu", "device")?;
        let ptr = data.as_mut_ptr() as *mut c_void;
        // Boxing moves the Vec's header, not its elements: `ptr` stays valid until the
        // release callback frees the box.
        let owner = Box::into_raw(Box::new(data)) as *mut c_void;
        // SAFETY: ptr holds numel elements of T, aligned; the library calls release_vec::<T>
        // with `owner` exactly once, also when the call fails, and never uses ptr after.
        let p = create!(sys::dt_tensor, |out| sys::dt_tensor_create_from_memory(
            T::DTYPE.code(),
            shape_ptr(shape),
            nd,
            dev.as_ptr(),
            ptr,
            Some(release_vec::<T>),
            owner,
            &mut out
        ));
        Ok(Tensor::from_raw(p, Family::new()))
    }

    /// The elements in place, without a copy (`dt_tensor_data`). `Status::INVALID_ARGUMENT`
    /// unless the dtype is `T`'s, the tensor is on the CPU, and it shares its memory with
    /// no other live handle (a parameter view, a mesh tensor or a piece: copy those with
    /// [`Tensor::copy_to`]), so that nothing writes it while the slice lives.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let (p, n) = self.data::<T>()?;
        // SAFETY: data checked dtype, device, alignment and the element count; the memory
        // lives as long as this handle, which the borrow keeps, and no other handle can
        // write it (an exclusive family; making a piece needs &mut self).
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }

    /// The elements in place, writable; the same conditions as [`Tensor::as_slice`].
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let (p, n) = self.data::<T>()?;
        // SAFETY: as for as_slice, and `&mut self` makes this the only view.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }

    /// The address and element count for a slice of T, or why there cannot be one.
    fn data<T: Element>(&self) -> Result<(*mut T, usize)> {
        let p = self.raw()?;
        if !self.fam.is_exclusive() {
            return Err(Error::invalid(
                "dtrain: this tensor shares its memory with other handles (a parameter, a mesh \
                 tensor or a piece); copy it out instead of slicing it",
            ));
        }
        self.check_dtype::<T>("slice")?;
        let device = self.device()?;
        if device != "cpu" {
            return Err(Error::invalid(format!(
                "dtrain: a slice needs a CPU tensor, this one is on {device}"
            )));
        }
        let n = self.numel()?;
        if n == 0 {
            return Ok((std::ptr::NonNull::dangling().as_ptr(), 0));
        }
        let mut data: *mut c_void = ptr::null_mut();
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_data(p, &mut data) })?;
        let data = data as *mut T;
        if data.is_null() || data as usize % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(
                crate::Status::INTERNAL,
                "dtrain: dt_tensor_data gave a NULL or misaligned address",
            ));
        }
        Ok((data, n))
    }

    /// A CPU tensor of `shape` holding `data` (its dtype is `T`'s).
    pub fn from_slice<T: Element>(shape: &[i64], data: &[T]) -> Result<Tensor> {
        let mut t = Tensor::new(T::DTYPE, shape)?;
        t.copy_from(data)?;
        Ok(t)
    }

    pub fn dtype(&self) -> Result<DType> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut d = 0i32;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_dtype(p, &mut d) })?;
        DType::from_code(d).ok_or_else(|| Error::invalid(format!("dtrain: unknown dtype code {d}")))
    }

    pub fn ndim(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0i32;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_ndim(p, &mut n) })?;
        to_usize(i64::from(n), "ndim")
    }

    /// The sizes of the dims (of one piece, for a mesh tensor).
    pub fn shape(&self) -> Result<Vec<i64>> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut dims = [0i64; sys::DT_MAX_DIMS as usize];
        let mut n = 0i32;
        // SAFETY: live handle; dims holds DT_MAX_DIMS >= ndim entries.
        check(unsafe { sys::dt_tensor_ndim(p, &mut n) })?;
        check(unsafe { sys::dt_tensor_shape(p, dims.as_mut_ptr(), dims.len() as i32) })?;
        let n = usize::try_from(n).unwrap_or(0).min(dims.len());
        Ok(dims[..n].to_vec())
    }

    /// Number of elements.
    pub fn numel(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0i64;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_numel(p, &mut n) })?;
        to_usize(n, "numel")
    }

    /// Number of bytes.
    pub fn nbytes(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0usize;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_nbytes(p, &mut n) })?;
        Ok(n)
    }

    /// "cpu" or "cuda:N".
    pub fn device(&self) -> Result<String> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut s: *const c_char = ptr::null();
        // SAFETY: live handle; the string is owned by the tensor and copied at once.
        check(unsafe { sys::dt_tensor_device(p, &mut s) })?;
        Ok(unsafe { owned_str(s) })
    }

    /// Err unless the tensor's dtype is `T`'s; `what` names the other side ("slice").
    fn check_dtype<T: Element>(&self, what: &str) -> Result<()> {
        let dtype = self.dtype()?;
        if dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "dtrain: the tensor holds {}, the {what} {}",
                dtype.name(),
                T::DTYPE.name()
            )));
        }
        Ok(())
    }

    fn check_host<T: Element>(&self, len: usize) -> Result<()> {
        self.check_dtype::<T>("host slice")?;
        let numel = self.numel()?;
        if numel != len {
            return Err(Error::invalid(format!(
                "dtrain: the tensor has {numel} elements, the host slice {len}"
            )));
        }
        Ok(())
    }

    /// Copies `src` into the tensor. Its dtype must be `T`'s and `src.len()` its numel.
    pub fn copy_from<T: Element>(&mut self, src: &[T]) -> Result<()> {
        let p = self.raw()?;
        self.check_host::<T>(src.len())?;
        let _g = lock(&[&self.fam]);
        // SAFETY: src is valid for its byte length, which equals the tensor's byte size.
        check(unsafe {
            sys::dt_tensor_copy_from_host(
                p,
                src.as_ptr() as *const c_void,
                std::mem::size_of_val(src),
            )
        })
    }

    /// Copies the tensor into `dst`. Its dtype must be `T`'s and `dst.len()` its numel.
    pub fn copy_to<T: Element>(&self, dst: &mut [T]) -> Result<()> {
        let p = self.raw()?;
        self.check_host::<T>(dst.len())?;
        let _g = lock(&[&self.fam]);
        // SAFETY: dst is valid for writes of its byte length, the tensor's byte size.
        check(unsafe {
            sys::dt_tensor_copy_to_host(
                p,
                dst.as_mut_ptr() as *mut c_void,
                std::mem::size_of_val(dst),
            )
        })
    }

    /// The contents as a new vector (the dtype must be `T`'s).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let mut v = try_filled(self.numel()?, T::default(), "the tensor's copy")?;
        self.copy_to(&mut v)?;
        Ok(v)
    }

    /// Copies raw bytes in (any dtype, e.g. bf16 bits); `src.len()` must be its nbytes.
    pub fn copy_from_bytes(&mut self, src: &[u8]) -> Result<()> {
        let p = self.raw()?;
        let n = self.nbytes()?;
        if n != src.len() {
            return Err(Error::invalid(format!(
                "dtrain: the tensor has {n} bytes, the host slice {}",
                src.len()
            )));
        }
        let _g = lock(&[&self.fam]);
        // SAFETY: src is valid for n bytes.
        check(unsafe { sys::dt_tensor_copy_from_host(p, src.as_ptr() as *const c_void, n) })
    }

    /// Copies raw bytes out; `dst.len()` must be its nbytes.
    pub fn copy_to_bytes(&self, dst: &mut [u8]) -> Result<()> {
        let p = self.raw()?;
        let n = self.nbytes()?;
        if n != dst.len() {
            return Err(Error::invalid(format!(
                "dtrain: the tensor has {n} bytes, the host slice {}",
                dst.len()
            )));
        }
        let _g = lock(&[&self.fam]);
        // SAFETY: dst is valid for writes of n bytes.
        check(unsafe { sys::dt_tensor_copy_to_host(p, dst.as_mut_ptr() as *mut c_void, n) })
    }

    /// Copies this tensor into `dst`, converting the dtype (equal element counts).
    pub fn copy_into(&self, dst: &mut Tensor) -> Result<()> {
        let (s, d) = (self.raw()?, dst.raw()?);
        let _g = lock(&[&self.fam, &dst.fam]);
        // SAFETY: both handles are live.
        check(unsafe { sys::dt_tensor_copy(s, d) })
    }

    /// Fills a floating tensor from N(mean, std), keyed by (seed, name, global index).
    pub fn fill_normal(
        &mut self,
        seed: u64,
        name: &str,
        offset: i64,
        mean: f32,
        std: f32,
    ) -> Result<()> {
        let p = self.raw()?;
        let n = cstring(name, "fill name")?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle, valid string.
        check(unsafe { sys::dt_tensor_fill_normal(p, seed, n.as_ptr(), offset, mean, std) })
    }

    /// Fills a floating tensor from U[lo, hi), keyed by (seed, name, global index).
    pub fn fill_uniform(
        &mut self,
        seed: u64,
        name: &str,
        offset: i64,
        lo: f32,
        hi: f32,
    ) -> Result<()> {
        let p = self.raw()?;
        let n = cstring(name, "fill name")?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle, valid string.
        check(unsafe { sys::dt_tensor_fill_uniform(p, seed, n.as_ptr(), offset, lo, hi) })
    }

    /// Number of pieces: one per local rank for a mesh tensor, else 1.
    pub fn piece_count(&self) -> Result<usize> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut n = 0i32;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::dt_tensor_piece_count(p, &mut n) })?;
        to_usize(i64::from(n), "piece count")
    }

    /// A plain tensor viewing piece `local_index` (it shares the storage and keeps it alive).
    /// It can write this tensor's memory, hence `&mut self`: no slice of it
    /// ([`Tensor::as_slice`]) may be alive meanwhile.
    pub fn piece(&mut self, local_index: usize) -> Result<Tensor> {
        let p = self.raw()?;
        let i = i32::try_from(local_index)
            .map_err(|_| Error::invalid("dtrain: piece index too large"))?;
        let _g = lock(&[&self.fam]);
        let out = create!(sys::dt_tensor, |out| sys::dt_tensor_piece(p, i, &mut out));
        Ok(Tensor::from_raw(out, self.fam.clone()))
    }
}

/// `c = op(a) @ op(b)` (`dt_matmul`); `trans_*` transposes the last two dims.
pub fn matmul(a: &Tensor, b: &Tensor, trans_a: bool, trans_b: bool, c: &mut Tensor) -> Result<()> {
    let (pa, pb, pc) = (a.raw()?, b.raw()?, c.raw()?);
    let _g = lock(&[&a.fam, &b.fam, &c.fam]);
    // SAFETY: live handles.
    check(unsafe { sys::dt_matmul(pa, pb, i32::from(trans_a), i32::from(trans_b), pc) })
}

/// `y = softmax(x)` over the last dim (`dt_softmax`).
pub fn softmax(x: &Tensor, y: &mut Tensor) -> Result<()> {
    let (px, py) = (x.raw()?, y.raw()?);
    let _g = lock(&[&x.fam, &y.fam]);
    // SAFETY: live handles.
    check(unsafe { sys::dt_softmax(px, py) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub(super) static RELEASED: AtomicUsize = AtomicUsize::new(0);

    // One test only touches RELEASED, so the count is exact.
    #[test]
    fn a_lent_vec_is_released_exactly_once() {
        let before = RELEASED.load(Ordering::SeqCst);
        let mut t = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        let mut p = t.piece(0).unwrap();
        t.close();
        assert_eq!(
            RELEASED.load(Ordering::SeqCst),
            before,
            "released while a view lives"
        );
        p.close();
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1);
        // A failed create releases the loan too (here: a zero dim).
        assert!(Tensor::from_vec(Vec::<i32>::new(), &[0]).is_err());
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 2);
    }
}
