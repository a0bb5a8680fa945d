package org.dtrain;

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
    super(DtrainNative.dt_mesh_create(requireArg(backend, "backend"), worldSize, optional(options)));
  }

  public Mesh(String backend, int worldSize, Map<String, ?> options) {
    super(create(backend, worldSize, options));
  }

  private static long create(String backend, int worldSize, Map<String, ?> map) {
    requireArg(backend, "backend");
    return Options.with(map, o -> DtrainNative.dt_mesh_create(backend, worldSize, optional(o)));
  }

  /** Ranks in the world. */
  public int worldSize() {
    return DtrainNative.dt_mesh_world_size(ptr());
  }

  /** Ranks this process drives (local: the world size; mpi: 1). */
  public int localRankCount() {
    return DtrainNative.dt_mesh_local_rank_count(ptr());
  }

  /** The global rank of local rank {@code localIndex}. */
  public int localRank(int localIndex) {
    return DtrainNative.dt_mesh_local_rank(ptr(), localIndex);
  }

  /** Ranks in a group over {@code axis}. */
  public int axisSize(String axis) {
    return DtrainNative.dt_mesh_axis_size(ptr(), requireArg(axis, "axis"));
  }

  /** Position of global rank {@code rank} in its group over {@code axis}. */
  public int coord(int rank, String axis) {
    return DtrainNative.dt_mesh_coord(ptr(), rank, requireArg(axis, "axis"));
  }

  /** "local" or "mpi". */
  public String backend() {
    return DtrainNative.dt_mesh_backend(ptr());
  }

  /** In place: every rank's piece becomes op over its group's pieces. */
  public void allReduce(String axis, Tensor tensor, ReduceOp op) {
    DtrainNative.dt_mesh_all_reduce(ptr(), requireArg(axis, "axis"), require(tensor, "tensor"),
        requireArg(op, "op").code());
  }

  /** recv = the group's send pieces, concatenated in group order. */
  public void allGather(String axis, Tensor send, Tensor recv) {
    DtrainNative.dt_mesh_all_gather(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"));
  }

  /** recv = this rank's block of op over the group's send pieces. */
  public void reduceScatter(String axis, Tensor send, Tensor recv, ReduceOp op) {
    DtrainNative.dt_mesh_reduce_scatter(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"), requireArg(op, "op").code());
  }

  /** In place: every rank's piece becomes the piece of the group's {@code root}. */
  public void broadcast(String axis, Tensor tensor, int root) {
    DtrainNative.dt_mesh_broadcast(ptr(), requireArg(axis, "axis"), require(tensor, "tensor"), root);
  }

  /** The root's recv piece becomes op over the group's send pieces. */
  public void reduce(String axis, Tensor send, Tensor recv, ReduceOp op, int root) {
    DtrainNative.dt_mesh_reduce(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"), requireArg(op, "op").code(), root);
  }

  /** Block j of each send piece goes to the group's rank j. */
  public void allToAll(String axis, Tensor send, Tensor recv) {
    DtrainNative.dt_mesh_all_to_all(ptr(), requireArg(axis, "axis"), require(send, "send"),
        require(recv, "recv"));
  }

  /** Returns once every rank of each group over {@code axis} has arrived. */
  public void barrier(String axis) {
    DtrainNative.dt_mesh_barrier(ptr(), requireArg(axis, "axis"));
  }

  /** Puts the mesh in its error state (callable from another thread while one uses it). */
  public void abort() {
    DtrainNative.dt_mesh_abort(ptr());
  }

  /** The comm ledger of local rank {@code rank} for collective {@code kind} over {@code axis}. */
  public CommStats commStats(int rank, String axis, String kind) {
    double[] v = DtrainNative.dt_mesh_comm_stats(ptr(), rank, requireArg(axis, "axis"),
        requireArg(kind, "kind"));
    return new CommStats((long) v[0], (long) v[1], v[2]);
  }

  /** The bandwidth-optimal wire bytes of the same calls. */
  public long commWireBytes(int rank, String axis, String kind) {
    return DtrainNative.dt_mesh_comm_wire_bytes(ptr(), rank, requireArg(axis, "axis"),
        requireArg(kind, "kind"));
  }

  /** The comm ledger of every local rank and axis as JSON. */
  public String commReportJson() {
    return DtrainNative.dt_mesh_comm_report_json(ptr());
  }

  /** Each local rank's last 64 collectives and the mesh's failure as JSON
   *  (dt_mesh_comm_history_json); works on a failed mesh, which is when it matters. */
  public String commHistoryJson() {
    return DtrainNative.dt_mesh_comm_history_json(ptr());
  }

  @Override
  void destroy(long p) {
    DtrainNative.dt_mesh_destroy(p);
  }

  @Override
  public String toString() {
    return isClosed() ? "Mesh(closed)" : "Mesh(" + backend() + ", world " + worldSize() + ")";
  }
}
