package dtrain

import (
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// ReduceOp is the reduction of a collective.
type ReduceOp int32

// The reductions. Avg is Sum divided by the group size.
const (
	ReduceSum  ReduceOp = 0
	ReduceAvg  ReduceOp = 1
	ReduceMax  ReduceOp = 2
	ReduceMin  ReduceOp = 3
	ReduceProd ReduceOp = 4
)

// Mesh is the world's ranks arranged on named axes ("dp", "pp", "ep", "cp", "tp"); this
// process drives its local ranks (all of them with the "local" backend, one with "mpi").
// An axis argument names one axis, a product such as "dp*cp", or "world".
type Mesh struct{ obj *owned[cdt.Mesh] }

// NewMesh creates a mesh. backend: "local" (ranks are threads of this process) or "mpi".
// worldSize: local: 1 to 1024 ranks; mpi: 0 (the MPI world) or its size. opts: nil or
// "dp", "pp", "ep", "cp", "tp" (axis sizes), "timeout_ms", "check_args".
func NewMesh(backend string, worldSize int, opts Options) (*Mesh, error) {
	ws, err := int32Arg("worldSize", worldSize)
	if err != nil {
		return nil, err
	}
	return create[Mesh](opts, func(o cdt.Options, p *cdt.Mesh) cdt.Status {
		return cdt.Dt_mesh_create(backend, ws, o, p)
	}, cdt.Dt_mesh_destroy)
}

func (m *Mesh) handle() (cdt.Mesh, error) { return handleOf(m) }

// optionalMesh is m's handle, or the null handle for a nil mesh (the C API's NULL: this
// process alone).
func optionalMesh(m *Mesh) (cdt.Mesh, error) {
	if m == nil {
		var none cdt.Mesh
		return none, nil
	}
	return m.handle()
}

// Close releases the handle; mesh tensors and engines made on it keep the mesh alive.
// Idempotent.
func (m *Mesh) Close() error { return closeHandle(m) }

// WorldSize returns the number of ranks in the world (0 for a closed mesh).
func (m *Mesh) WorldSize() int { return int(peek(m, cdt.Dt_mesh_world_size)) }

// LocalRankCount returns the number of ranks this process drives (0 for a closed mesh).
func (m *Mesh) LocalRankCount() int { return int(peek(m, cdt.Dt_mesh_local_rank_count)) }

// LocalRank returns the global rank of local rank localIndex.
func (m *Mesh) LocalRank(localIndex int) (int, error) {
	i, err := int32Arg("localIndex", localIndex)
	if err != nil {
		return 0, err
	}
	return asInt(query(m, func(h cdt.Mesh, out *int32) cdt.Status {
		return cdt.Dt_mesh_local_rank(h, i, out)
	}))
}

// AxisSize returns the number of ranks in a group over axis.
func (m *Mesh) AxisSize(axis string) (int, error) {
	return asInt(query(m, func(h cdt.Mesh, out *int32) cdt.Status {
		return cdt.Dt_mesh_axis_size(h, axis, out)
	}))
}

// Coord returns the position of global rank in its group over axis.
func (m *Mesh) Coord(rank int, axis string) (int, error) {
	r, err := int32Arg("rank", rank)
	if err != nil {
		return 0, err
	}
	return asInt(query(m, func(h cdt.Mesh, out *int32) cdt.Status {
		return cdt.Dt_mesh_coord(h, r, axis, out)
	}))
}

// Backend returns the backend's name, "local" or "mpi" ("" for a closed mesh).
func (m *Mesh) Backend() string { return peek(m, cdt.Dt_mesh_backend) }

// NewTensor creates a mesh tensor: one zero-filled CPU piece of dtype and shape per local
// rank. Read and write the pieces through Tensor.Piece.
func (m *Mesh) NewTensor(dtype DType, shape ...int) (*Tensor, error) {
	h, err := m.handle()
	if err != nil {
		return nil, err
	}
	dims, err := shapeArg(shape)
	if err != nil {
		return nil, err
	}
	var p cdt.Tensor
	err = check(cdt.Dt_tensor_create_on_mesh(h, int32(dtype), firstInt64(dims), int32(len(dims)), 0, &p))
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// AllReduce makes, in place, every rank's piece of t the op over its group's pieces.
func (m *Mesh) AllReduce(axis string, t *Tensor, op ReduceOp) error {
	return withTensors(m, []*Tensor{t}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_reduce(h, axis, ts[0], int32(op))
	})
}

// AllGather sets recv to the group's send pieces concatenated in group order.
func (m *Mesh) AllGather(axis string, send, recv *Tensor) error {
	return withTensors(m, []*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_gather(h, axis, ts[0], ts[1])
	})
}

// ReduceScatter sets recv to this rank's block of op over the group's send pieces.
func (m *Mesh) ReduceScatter(axis string, send, recv *Tensor, op ReduceOp) error {
	return withTensors(m, []*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_reduce_scatter(h, axis, ts[0], ts[1], int32(op))
	})
}

// Broadcast makes, in place, every rank's piece the piece of the group's root.
func (m *Mesh) Broadcast(axis string, t *Tensor, root int) error {
	r, err := int32Arg("root", root)
	if err != nil {
		return err
	}
	return withTensors(m, []*Tensor{t}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_broadcast(h, axis, ts[0], r)
	})
}

// Reduce sets the root's recv piece to op over the group's send pieces.
func (m *Mesh) Reduce(axis string, send, recv *Tensor, op ReduceOp, root int) error {
	r, err := int32Arg("root", root)
	if err != nil {
		return err
	}
	return withTensors(m, []*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_reduce(h, axis, ts[0], ts[1], int32(op), r)
	})
}

// AllToAll sends block j of each send piece to the group's rank j.
func (m *Mesh) AllToAll(axis string, send, recv *Tensor) error {
	return withTensors(m, []*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_to_all(h, axis, ts[0], ts[1])
	})
}

// Barrier returns once every rank of each group over axis has arrived.
func (m *Mesh) Barrier(axis string) error {
	return invoke(m, func(h cdt.Mesh) cdt.Status { return cdt.Dt_mesh_barrier(h, axis) })
}

// Abort puts the mesh in its error state; callable from any goroutine.
func (m *Mesh) Abort() error {
	return invoke(m, cdt.Dt_mesh_abort)
}

// CommReportJSON returns the comm ledger of every local rank and axis used so far as JSON.
func (m *Mesh) CommReportJSON() (string, error) {
	return reportJSON(m, cdt.Dt_mesh_comm_report_json)
}

// CommHistoryJSON returns each local rank's last 64 collectives and the mesh's failure as
// JSON (dt_mesh_comm_history_json); it works on a failed mesh, which is when it matters.
func (m *Mesh) CommHistoryJSON() (string, error) {
	return reportJSON(m, cdt.Dt_mesh_comm_history_json)
}
