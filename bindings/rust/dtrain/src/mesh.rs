//! Device meshes, mesh tensors and collectives.
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr;
use std::sync::Arc;

use dtrain_sys as sys;

use crate::error::{check, static_str, Error, Result};
use crate::handle::{create, lock, Family};
use crate::options::{cstring, CallOptions, Pairs};
use crate::read_json;
use crate::tensor::{shape_ptr, DType, Tensor};

/// The reduction of a collective (`dt_reduce_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// Sum divided by the group size.
    Avg,
    Max,
    Min,
    Prod,
}

impl ReduceOp {
    pub fn code(self) -> i32 {
        (match self {
            ReduceOp::Sum => sys::DT_REDUCE_SUM,
            ReduceOp::Avg => sys::DT_REDUCE_AVG,
            ReduceOp::Max => sys::DT_REDUCE_MAX,
            ReduceOp::Min => sys::DT_REDUCE_MIN,
            ReduceOp::Prod => sys::DT_REDUCE_PROD,
        }) as i32
    }
}

/// One rank's comm ledger for one axis and collective kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    pub calls: i64,
    pub bytes: i64,
    pub seconds: f64,
}

/// Owns one reference to the C mesh. Shared by the [`Mesh`] and its [`MeshAbortHandle`]s;
/// the last owner releases it.
struct MeshRef(*mut sys::dt_mesh);

// SAFETY: the mesh's calls run under its family lock (handle.rs); the one call made
// through a shared MeshRef without it is dt_mesh_abort, which dtrain.h allows from any
// thread while another uses the mesh.
unsafe impl Send for MeshRef {}
unsafe impl Sync for MeshRef {}

impl Drop for MeshRef {
    fn drop(&mut self) {
        // SAFETY: owned, released exactly once; mesh tensors keep the mesh alive.
        unsafe { sys::dt_mesh_destroy(self.0) }
    }
}

/// The world's ranks on named axes (`dt_mesh`). With the "local" backend every rank is a
/// thread of this process and one call drives them all.
pub struct Mesh {
    raw: Option<Arc<MeshRef>>,
    fam: Family,
    // Send but not Sync, like the other handles (one thread at a time).
    _not_sync: PhantomData<Cell<()>>,
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.raw {
            None => write!(f, "Mesh(closed)"),
            Some(r) => write!(f, "Mesh({:p})", r.0),
        }
    }
}

/// Fails a mesh from any thread ([`Mesh::abort_handle`]): `Send + Sync` and cloneable, for
/// a watchdog while another thread is blocked in a collective or a train step on the mesh.
#[derive(Clone)]
pub struct MeshAbortHandle(Arc<MeshRef>);

impl MeshAbortHandle {
    /// [`Mesh::abort`], from any thread.
    pub fn abort(&self) -> Result<()> {
        // SAFETY: a live mesh (this handle owns a reference); thread-safe by dtrain.h.
        check(unsafe { sys::dt_mesh_abort(self.0 .0) })
    }
}

impl std::fmt::Debug for MeshAbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MeshAbortHandle({:p})", self.0 .0)
    }
}

impl Mesh {
    /// `backend`: "local" or "mpi". `world_size`: local: 1 to 1024; mpi: 0 (the MPI world)
    /// or its size. Options: "dp", "pp", "ep", "cp", "tp", "timeout_ms", "check_args".
    pub fn new(backend: &str, world_size: i32, options: &Pairs) -> Result<Mesh> {
        let b = cstring(backend, "backend")?;
        let opts = CallOptions::new(options)?;
        let p = create!(sys::dt_mesh, |out| sys::dt_mesh_create(
            b.as_ptr(),
            world_size,
            opts.ptr(),
            &mut out
        ));
        Ok(Mesh {
            raw: Some(Arc::new(MeshRef(p))),
            fam: Family::new(),
            _not_sync: PhantomData,
        })
    }

    /// Releases the handle now. Idempotent; dropping does the same. Later calls fail with
    /// `Status::INVALID_ARGUMENT`. Mesh tensors, engines and abort handles made from it
    /// keep the mesh alive.
    pub fn close(&mut self) {
        self.raw = None;
    }

    /// Whether [`close`](Self::close) has run.
    pub fn is_closed(&self) -> bool {
        self.raw.is_none()
    }

    /// The raw C handle (NULL once closed), for calls this crate does not wrap. It stays
    /// owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dt_mesh {
        self.raw.as_ref().map_or(ptr::null_mut(), |r| r.0)
    }

    pub(crate) fn raw(&self) -> Result<*mut sys::dt_mesh> {
        self.raw
            .as_ref()
            .map(|r| r.0)
            .ok_or_else(|| Error::closed("Mesh"))
    }

    pub(crate) fn family(&self) -> &Family {
        &self.fam
    }

    /// Puts the mesh in its error state (`dt_mesh_abort`): every collective waiting on it
    /// returns `Status::ABORTED` within a second, and so does every later one; build a new
    /// mesh to go on. To abort from another thread while this one is blocked, use
    /// [`Mesh::abort_handle`]. To stop a train step and keep the mesh, cancel it instead
    /// ([`crate::CancelToken`]).
    pub fn abort(&self) -> Result<()> {
        self.abort_handle()?.abort()
    }

    /// A `Send + Sync` handle that aborts this mesh from any thread. It keeps the mesh
    /// alive.
    pub fn abort_handle(&self) -> Result<MeshAbortHandle> {
        let r = self.raw.clone().ok_or_else(|| Error::closed("Mesh"))?;
        Ok(MeshAbortHandle(r))
    }

    fn get_i32(
        &self,
        f: impl FnOnce(*mut sys::dt_mesh, *mut i32) -> sys::dt_status,
    ) -> Result<i32> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut v = 0i32;
        check(f(p, &mut v))?;
        Ok(v)
    }

    /// Ranks in the world (every process, every axis).
    pub fn world_size(&self) -> Result<i32> {
        // SAFETY (all getters): live handle, valid out-pointer.
        self.get_i32(|p, v| unsafe { sys::dt_mesh_world_size(p, v) })
    }

    /// Ranks this process drives (local: the world size; mpi: 1).
    pub fn local_rank_count(&self) -> Result<i32> {
        self.get_i32(|p, v| unsafe { sys::dt_mesh_local_rank_count(p, v) })
    }

    /// The global rank of local rank `local_index`.
    pub fn local_rank(&self, local_index: i32) -> Result<i32> {
        self.get_i32(|p, v| unsafe { sys::dt_mesh_local_rank(p, local_index, v) })
    }

    /// Ranks in a group over `axis` ("dp", "tp", "dp*cp", "world", ...).
    pub fn axis_size(&self, axis: &str) -> Result<i32> {
        let a = cstring(axis, "axis")?;
        self.get_i32(|p, v| unsafe { sys::dt_mesh_axis_size(p, a.as_ptr(), v) })
    }

    /// Position of global rank `rank` in its group over `axis`.
    pub fn coord(&self, rank: i32, axis: &str) -> Result<i32> {
        let a = cstring(axis, "axis")?;
        self.get_i32(|p, v| unsafe { sys::dt_mesh_coord(p, rank, a.as_ptr(), v) })
    }

    /// "local" or "mpi".
    pub fn backend(&self) -> Result<&'static str> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        let mut s: *const c_char = ptr::null();
        // SAFETY: live handle; the name is a static string.
        check(unsafe { sys::dt_mesh_backend(p, &mut s) })?;
        Ok(unsafe { static_str(s) })
    }

    /// A mesh tensor: one zero-filled CPU piece of `shape` per local rank.
    pub fn tensor(&self, dtype: DType, shape: &[i64]) -> Result<Tensor> {
        self.tensor_with_options(dtype, shape, &[])
    }

    /// [`Mesh::tensor`] with options ("tag").
    pub fn tensor_with_options(
        &self,
        dtype: DType,
        shape: &[i64],
        options: &Pairs,
    ) -> Result<Tensor> {
        let p = self.raw()?;
        let opts = CallOptions::new(options)?;
        let nd = i32::try_from(shape.len()).map_err(|_| Error::invalid("dtrain: too many dims"))?;
        let _g = lock(&[&self.fam]);
        let t = create!(sys::dt_tensor, |out| sys::dt_tensor_create_on_mesh(
            p,
            dtype.code(),
            shape_ptr(shape),
            nd,
            opts.ptr(),
            &mut out
        ));
        Ok(Tensor::from_raw(t, self.fam.clone()))
    }

    /// In place: every rank's piece becomes `op` over its group's pieces.
    pub fn all_reduce(&self, axis: &str, tensor: &mut Tensor, op: ReduceOp) -> Result<()> {
        let (p, t) = (self.raw()?, tensor.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, tensor.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_all_reduce(p, a.as_ptr(), t, op.code()) })
    }

    /// `recv` = the group's `send` pieces concatenated in group order.
    pub fn all_gather(&self, axis: &str, send: &Tensor, recv: &mut Tensor) -> Result<()> {
        let (p, s, r) = (self.raw()?, send.raw()?, recv.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, send.family(), recv.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_all_gather(p, a.as_ptr(), s, r) })
    }

    /// `recv` = this rank's block of `op` over the group's `send` pieces.
    pub fn reduce_scatter(
        &self,
        axis: &str,
        send: &Tensor,
        recv: &mut Tensor,
        op: ReduceOp,
    ) -> Result<()> {
        let (p, s, r) = (self.raw()?, send.raw()?, recv.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, send.family(), recv.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_reduce_scatter(p, a.as_ptr(), s, r, op.code()) })
    }

    /// In place: every piece becomes the piece of the group's `root`.
    pub fn broadcast(&self, axis: &str, tensor: &mut Tensor, root: i32) -> Result<()> {
        let (p, t) = (self.raw()?, tensor.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, tensor.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_broadcast(p, a.as_ptr(), t, root) })
    }

    /// The `recv` piece of the group's `root` becomes `op` over the `send` pieces.
    pub fn reduce(
        &self,
        axis: &str,
        send: &Tensor,
        recv: &mut Tensor,
        op: ReduceOp,
        root: i32,
    ) -> Result<()> {
        let (p, s, r) = (self.raw()?, send.raw()?, recv.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, send.family(), recv.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_reduce(p, a.as_ptr(), s, r, op.code(), root) })
    }

    /// Equal splits: block j of each `send` piece goes to the group's rank j.
    pub fn all_to_all(&self, axis: &str, send: &Tensor, recv: &mut Tensor) -> Result<()> {
        let (p, s, r) = (self.raw()?, send.raw()?, recv.raw()?);
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam, send.family(), recv.family()]);
        // SAFETY: live handles, valid string.
        check(unsafe { sys::dt_mesh_all_to_all(p, a.as_ptr(), s, r) })
    }

    /// Returns once every rank of each group over `axis` has arrived.
    pub fn barrier(&self, axis: &str) -> Result<()> {
        let p = self.raw()?;
        let a = cstring(axis, "axis")?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle, valid string.
        check(unsafe { sys::dt_mesh_barrier(p, a.as_ptr()) })
    }

    /// Comm ledger of local rank `rank` for collective `kind` ("all_reduce", ...) on `axis`.
    pub fn comm_stats(&self, rank: i32, axis: &str, kind: &str) -> Result<CommStats> {
        let p = self.raw()?;
        let (a, k) = (cstring(axis, "axis")?, cstring(kind, "collective kind")?);
        let _g = lock(&[&self.fam]);
        let mut s = CommStats::default();
        // SAFETY: live handle, valid strings and out-pointers.
        check(unsafe {
            sys::dt_mesh_comm_stats(
                p,
                rank,
                a.as_ptr(),
                k.as_ptr(),
                &mut s.calls,
                &mut s.bytes,
                &mut s.seconds,
            )
        })?;
        Ok(s)
    }

    /// The wire bytes (what a bandwidth-optimal algorithm moves) of the same calls.
    pub fn comm_wire_bytes(&self, rank: i32, axis: &str, kind: &str) -> Result<i64> {
        let p = self.raw()?;
        let (a, k) = (cstring(axis, "axis")?, cstring(kind, "collective kind")?);
        let _g = lock(&[&self.fam]);
        let mut n = 0i64;
        // SAFETY: live handle, valid strings and out-pointer.
        check(unsafe { sys::dt_mesh_comm_wire_bytes(p, rank, a.as_ptr(), k.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// The comm ledger of every local rank and axis as JSON.
    pub fn comm_report_json(&self) -> Result<String> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes.
        read_json(|buf, cap, needed| unsafe { sys::dt_mesh_comm_report_json(p, buf, cap, needed) })
    }

    /// Each local rank's last 64 collectives and the mesh's failure as JSON
    /// (`dt_mesh_comm_history_json`); it works on a failed mesh, which is when it matters.
    pub fn comm_history_json(&self) -> Result<String> {
        let p = self.raw()?;
        let _g = lock(&[&self.fam]);
        // SAFETY: live handle; read_json passes a buffer of `cap` bytes.
        read_json(|buf, cap, needed| unsafe { sys::dt_mesh_comm_history_json(p, buf, cap, needed) })
    }
}
