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
type Mesh struct{ obj object[cdt.Mesh] }

// NewMesh creates a mesh. backend: "local" (ranks are threads of this process) or "mpi".
// worldSize: local: 1 to 1024 ranks; mpi: 0 (the MPI world) or its size. opts: nil or
// "dp", "pp", "ep", "cp", "tp" (axis sizes), "timeout_ms", "check_args".
func NewMesh(backend string, worldSize int, opts Options) (*Mesh, error) {
	ws, err := int32Arg("worldSize", worldSize)
	if err != nil {
		return nil, err
	}
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Mesh
	if err := check(cdt.Dt_mesh_create(backend, ws, o, &p)); err != nil {
		return nil, err
	}
	m := &Mesh{}
	m.obj.set(p, cdt.Dt_mesh_destroy)
	runtime.SetFinalizer(m, func(m *Mesh) { m.obj.release() })
	return m, nil
}

func (m *Mesh) handle() (cdt.Mesh, error) {
	if m == nil {
		return 0, nilHandle("Mesh")
	}
	return m.obj.get("Mesh")
}

// Close releases the handle; mesh tensors and engines made on it keep the mesh alive.
// Idempotent.
func (m *Mesh) Close() error {
	if m != nil {
		runtime.SetFinalizer(m, nil)
		m.obj.release()
	}
	return nil
}

func (m *Mesh) int32Query(f func(cdt.Mesh, *int32) cdt.Status) (int, error) {
	h, err := m.handle()
	if err != nil {
		return 0, err
	}
	var n int32
	err = check(f(h, &n))
	runtime.KeepAlive(m)
	return int(n), err
}

// WorldSize returns the number of ranks in the world.
func (m *Mesh) WorldSize() (int, error) { return m.int32Query(cdt.Dt_mesh_world_size) }

// LocalRankCount returns the number of ranks this process drives.
func (m *Mesh) LocalRankCount() (int, error) { return m.int32Query(cdt.Dt_mesh_local_rank_count) }

// LocalRank returns the global rank of local rank localIndex.
func (m *Mesh) LocalRank(localIndex int) (int, error) {
	i, err := int32Arg("localIndex", localIndex)
	if err != nil {
		return 0, err
	}
	return m.int32Query(func(h cdt.Mesh, out *int32) cdt.Status { return cdt.Dt_mesh_local_rank(h, i, out) })
}

// AxisSize returns the number of ranks in a group over axis.
func (m *Mesh) AxisSize(axis string) (int, error) {
	return m.int32Query(func(h cdt.Mesh, out *int32) cdt.Status { return cdt.Dt_mesh_axis_size(h, axis, out) })
}

// Coord returns the position of global rank in its group over axis.
func (m *Mesh) Coord(rank int, axis string) (int, error) {
	r, err := int32Arg("rank", rank)
	if err != nil {
		return 0, err
	}
	return m.int32Query(func(h cdt.Mesh, out *int32) cdt.Status { return cdt.Dt_mesh_coord(h, r, axis, out) })
}

// Backend returns the backend's name, "local" or "mpi".
func (m *Mesh) Backend() (string, error) {
	h, err := m.handle()
	if err != nil {
		return "", err
	}
	var s string
	err = check(cdt.Dt_mesh_backend(h, &s))
	runtime.KeepAlive(m)
	return s, err
}

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

// collective runs f on the mesh and the given tensors, keeping them alive through the call.
func (m *Mesh) collective(tensors []*Tensor, f func(cdt.Mesh, []cdt.Tensor) cdt.Status) error {
	h, err := m.handle()
	if err != nil {
		return err
	}
	hs := make([]cdt.Tensor, len(tensors))
	for i, t := range tensors {
		if hs[i], err = t.handle(); err != nil {
			return err
		}
	}
	err = check(f(h, hs))
	runtime.KeepAlive(m)
	runtime.KeepAlive(tensors)
	return err
}

// AllReduce makes, in place, every rank's piece of t the op over its group's pieces.
func (m *Mesh) AllReduce(axis string, t *Tensor, op ReduceOp) error {
	return m.collective([]*Tensor{t}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_reduce(h, axis, ts[0], int32(op))
	})
}

// AllGather sets recv to the group's send pieces concatenated in group order.
func (m *Mesh) AllGather(axis string, send, recv *Tensor) error {
	return m.collective([]*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_gather(h, axis, ts[0], ts[1])
	})
}

// ReduceScatter sets recv to this rank's block of op over the group's send pieces.
func (m *Mesh) ReduceScatter(axis string, send, recv *Tensor, op ReduceOp) error {
	return m.collective([]*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_reduce_scatter(h, axis, ts[0], ts[1], int32(op))
	})
}

// Broadcast makes, in place, every rank's piece the piece of the group's root.
func (m *Mesh) Broadcast(axis string, t *Tensor, root int) error {
	r, err := int32Arg("root", root)
	if err != nil {
		return err
	}
	return m.collective([]*Tensor{t}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_broadcast(h, axis, ts[0], r)
	})
}

// Reduce sets the root's recv piece to op over the group's send pieces.
func (m *Mesh) Reduce(axis string, send, recv *Tensor, op ReduceOp, root int) error {
	r, err := int32Arg("root", root)
	if err != nil {
		return err
	}
	return m.collective([]*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_reduce(h, axis, ts[0], ts[1], int32(op), r)
	})
}

// AllToAll sends block j of each send piece to the group's rank j.
func (m *Mesh) AllToAll(axis string, send, recv *Tensor) error {
	return m.collective([]*Tensor{send, recv}, func(h cdt.Mesh, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_mesh_all_to_all(h, axis, ts[0], ts[1])
	})
}

// Barrier returns once every rank of each group over axis has arrived.
func (m *Mesh) Barrier(axis string) error {
	return m.collective(nil, func(h cdt.Mesh, _ []cdt.Tensor) cdt.Status { return cdt.Dt_mesh_barrier(h, axis) })
}

// Abort puts the mesh in its error state; callable from any goroutine.
func (m *Mesh) Abort() error {
	return m.collective(nil, func(h cdt.Mesh, _ []cdt.Tensor) cdt.Status { return cdt.Dt_mesh_abort(h) })
}

// CommReportJSON returns the comm ledger of every local rank and axis used so far as JSON.
func (m *Mesh) CommReportJSON() (string, error) {
	h, err := m.handle()
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(m)
	return readJSON(func(buf []byte, needed *int64) cdt.Status { return cdt.Dt_mesh_comm_report_json(h, buf, needed) })
}
