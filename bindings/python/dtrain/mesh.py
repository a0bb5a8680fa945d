"""dtrain.Mesh: ranks on named axes ("dp", "pp", "ep", "cp", "tp") and their collectives."""
from __future__ import annotations

import contextlib
from typing import Any, List, Optional, Tuple

from . import native
from ._handle import Handle, handle_of, options_ptr
from .tensor import DType, Shape, Tensor, _layout, _tag_options

_OPS = {"sum": native.DT_REDUCE_SUM, "avg": native.DT_REDUCE_AVG, "max": native.DT_REDUCE_MAX,
        "min": native.DT_REDUCE_MIN, "prod": native.DT_REDUCE_PROD}


def _op(op: str) -> int:
    if op not in _OPS:
        raise ValueError("op %r: accepted: %s" % (op, ", ".join(_OPS)))
    return _OPS[op]


class Mesh(Handle):
    """Mesh(backend="local", world_size=1, **options): "local" runs every rank as a thread
    of this process; "mpi" makes this process one rank of an mpirun (world_size 0: all).
    options: dp, pp, ep, cp, tp (axis sizes), timeout_ms, check_args."""

    _destroy = staticmethod(native.dt_mesh_destroy)

    def __init__(self, backend: str = "local", world_size: int = 1, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_mesh_create(backend, world_size, options_ptr(options, stack)))

    @property
    def world_size(self) -> int:
        return native.dt_mesh_world_size(self._h)

    @property
    def backend(self) -> str:
        return native.dt_mesh_backend(self._h)

    @property
    def local_ranks(self) -> List[int]:
        """The global ranks this process drives."""
        return [native.dt_mesh_local_rank(self._h, i) for i in range(native.dt_mesh_local_rank_count(self._h))]

    def axis_size(self, axis: str) -> int:
        return native.dt_mesh_axis_size(self._h, axis)

    def coord(self, rank: int, axis: str) -> int:
        return native.dt_mesh_coord(self._h, rank, axis)

    def tensor(self, dtype: DType, shape: Shape, tag: Optional[str] = None) -> Tensor:
        """A mesh tensor: one zero-filled piece of `shape` per local rank."""
        with contextlib.ExitStack() as stack:
            ptr = native.dt_tensor_create_on_mesh(self._h, *_layout(dtype, shape), _tag_options(tag, stack))
        return Tensor(None, None, _ptr=ptr)

    def all_reduce(self, tensor: Tensor, axis: str = "world", op: str = "sum") -> None:
        native.dt_mesh_all_reduce(self._h, axis, handle_of(tensor, Tensor, "tensor"), _op(op))

    def all_gather(self, send: Tensor, recv: Tensor, axis: str = "world") -> None:
        native.dt_mesh_all_gather(self._h, axis, handle_of(send, Tensor, "send"), handle_of(recv, Tensor, "recv"))

    def reduce_scatter(self, send: Tensor, recv: Tensor, axis: str = "world", op: str = "sum") -> None:
        native.dt_mesh_reduce_scatter(self._h, axis, handle_of(send, Tensor, "send"),
                                      handle_of(recv, Tensor, "recv"), _op(op))

    def broadcast(self, tensor: Tensor, root: int = 0, axis: str = "world") -> None:
        native.dt_mesh_broadcast(self._h, axis, handle_of(tensor, Tensor, "tensor"), root)

    def all_to_all(self, send: Tensor, recv: Tensor, axis: str = "world") -> None:
        native.dt_mesh_all_to_all(self._h, axis, handle_of(send, Tensor, "send"), handle_of(recv, Tensor, "recv"))

    def barrier(self, axis: str = "world") -> None:
        native.dt_mesh_barrier(self._h, axis)

    def abort(self) -> None:
        """Fails every collective waiting on this mesh (callable from any thread)."""
        native.dt_mesh_abort(self._h)

    def comm_stats(self, rank: int, axis: str, kind: str) -> Tuple[int, int, float]:
        """(calls, bytes, seconds) of collective `kind` by local rank `rank` over `axis`."""
        return tuple(native.dt_mesh_comm_stats(self._h, rank, axis, kind))

    def comm_report(self) -> Optional[dict]:
        """The comm ledger as a dict (see dt_mesh_comm_report_json)."""
        from ._json import read_json
        return read_json(lambda buf: native.dt_mesh_comm_report_json(self._h, buf))

    def comm_history(self) -> Optional[dict]:
        """Each local rank's last 64 collectives and the mesh's failure, as a dict (see
        dt_mesh_comm_history_json); works on a failed mesh, which is when it matters."""
        from ._json import read_json
        return read_json(lambda buf: native.dt_mesh_comm_history_json(self._h, buf))
