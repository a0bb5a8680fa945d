package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * A device mesh (dt_mesh): the world's ranks on the axes "dp", "pp", "ep", "cp", "tp".
 * Backend "local" runs every rank as a thread of this process; "mpi" makes this process one
 * rank of an mpirun. An {@code axis} argument is one axis, a product ("dp*cp") or "world".
 * Collectives take mesh tensors ({@link Tensor#onMesh}) and run on every local rank at once.
 */
public final class Mesh extends Handle {
  /** Calls, bytes this rank contributed, and seconds of one kind of collective. */
  public record CommStats(long calls, long bytes, double seconds) {}

  /** A mesh of {@code worldSize} ranks (local: 1 to 1024; mpi: 0 for the MPI world). */
  public Mesh(String backend, int worldSize) {
    this(backend, worldSize, (Options) null);
  }

  /** options: null or "dp", "pp", "ep", "cp", "tp" (axis sizes), "timeout_ms", "check_args". */
  public Mesh(String backend, int worldSize, Options options) {
    super(DtrainNative.dt_mesh_create(requireArg(backend, "backend"), worldSize, optional(options)),
        DtrainNative::dt_mesh_destroy);
    reachabilityFence(options);
  }

  public Mesh(String backend, int worldSize, Map<String, ?> options) {
    super(create(backend, worldSize, options), DtrainNative::dt_mesh_destroy);
  }

  private static long create(String backend, int worldSize, Map<String, ?> map) {
    requireArg(backend, "backend");
    return Options.with(map, o -> DtrainNative.dt_mesh_create(backend, worldSize, optional(o)));
  }

  /** Ranks in the world. */
  public int worldSize() {
    try {
      return DtrainNative.dt_mesh_world_size(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Ranks this process drives (local: the world size; mpi: 1). */
  public int localRankCount() {
    try {
      return DtrainNative.dt_mesh_local_rank_count(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The global rank of local rank {@code localIndex}. */
  public int localRank(int localIndex) {
    try {
      return DtrainNative.dt_mesh_local_rank(ptr(), localIndex);
    } finally {
      reachabilityFence(this);
    }
  }

  /** Ranks in a group over {@code axis}. */
  public int axisSize(String axis) {
    try {
      return DtrainNative.dt_mesh_axis_size(ptr(), requireArg(axis, "axis"));
    } finally {
      reachabilityFence(this);
    }
  }

  /** Position of global rank {@code rank} in its group over {@code axis}. */
  public int coord(int rank, String axis) {
    try {
      return DtrainNative.dt_mesh_coord(ptr(), rank, requireArg(axis, "axis"));
    } finally {
      reachabilityFence(this);
    }
  }

  /** "local" or "mpi". */
  public String backend() {
    try {
      return DtrainNative.dt_mesh_backend(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** In place: every rank's piece becomes op over its group's pieces. */
  public void allReduce(String axis, Tensor tensor, ReduceOp op) {
    DtrainNative.dt_mesh_all_reduce(ptr(), requireArg(axis, "axis"), require(tensor, "tensor"),
        requireArg(op, "op").code());
    reachabilityFence(this);
    reachabilityFence(tensor);
  }

  /** recv = the group's send pieces, concatenated in group order. */
  public void allGather(String axis, Tensor send, Tensor recv) {
    DtrainNative.dt_mesh_all_gather(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"));
    reachabilityFence(this);
    reachabilityFence(send);
    reachabilityFence(recv);
  }

  /** recv = this rank's block of op over the group's send pieces. */
  public void reduceScatter(String axis, Tensor send, Tensor recv, ReduceOp op) {
    DtrainNative.dt_mesh_reduce_scatter(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"), requireArg(op, "op").code());
    reachabilityFence(this);
    reachabilityFence(send);
    reachabilityFence(recv);
  }

  /** In place: every rank's piece becomes the piece of the group's {@code root}. */
  public void broadcast(String axis, Tensor tensor, int root) {
    DtrainNative.dt_mesh_broadcast(ptr(), requireArg(axis, "axis"), require(tensor, "tensor"), root);
    reachabilityFence(this);
    reachabilityFence(tensor);
  }

  /** The root's recv piece becomes op over the group's send pieces. */
  public void reduce(String axis, Tensor send, Tensor recv, ReduceOp op, int root) {
    DtrainNative.dt_mesh_reduce(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"), requireArg(op, "op").code(), root);
    reachabilityFence(this);
    reachabilityFence(send);
    reachabilityFence(recv);
  }

  /** Block j of each send piece goes to the group's rank j. */
  public void allToAll(String axis, Tensor send, Tensor recv) {
    DtrainNative.dt_mesh_all_to_all(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"));
    reachabilityFence(this);
    reachabilityFence(send);
    reachabilityFence(recv);
  }

  /** Returns once every rank of each group over {@code axis} has arrived. */
  public void barrier(String axis) {
    DtrainNative.dt_mesh_barrier(ptr(), requireArg(axis, "axis"));
    reachabilityFence(this);
  }

  /** Puts the mesh in its error state (callable from another thread while one uses it). */
  public void abort() {
    DtrainNative.dt_mesh_abort(ptr());
    reachabilityFence(this);
  }

  /** The comm ledger of local rank {@code rank} for collective {@code kind} over {@code axis}. */
  public CommStats commStats(int rank, String axis, String kind) {
    double[] seconds = new double[1];
    long[] v = DtrainNative.dt_mesh_comm_stats(ptr(), rank, requireArg(axis, "axis"),
        requireArg(kind, "kind"), seconds);
    reachabilityFence(this);
    return new CommStats(v[0], v[1], seconds[0]);
  }

  /** The bandwidth-optimal wire bytes of the same calls. */
  public long commWireBytes(int rank, String axis, String kind) {
    try {
      return DtrainNative.dt_mesh_comm_wire_bytes(ptr(), rank, requireArg(axis, "axis"),
          requireArg(kind, "kind"));
    } finally {
      reachabilityFence(this);
    }
  }

  /** The comm ledger of every local rank and axis as JSON. */
  public String commReportJson() {
    try {
      return DtrainNative.dt_mesh_comm_report_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Each local rank's last 64 collectives and the mesh's failure as JSON
   *  (dt_mesh_comm_history_json); works on a failed mesh, which is when it matters. */
  public String commHistoryJson() {
    try {
      return DtrainNative.dt_mesh_comm_history_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }


  @Override
  public String toString() {
    return isClosed() ? "Mesh(closed)" : "Mesh(" + backend() + ", world " + worldSize() + ")";
  }
}
