/*
 * dtrain.h: the one public header of libdtrain.
 *
 * libdtrain trains and serves neural networks on one CPU, one GPU, many GPUs and many
 * machines. Hosts in C, C++, Python, Go, Java and Rust drive it through this C ABI.
 *
 * Rules that hold for every function below (docs/abi.md says why):
 *  - Every fallible call returns a dt_status; 0 (DT_OK) is success. On failure,
 *    dt_last_error_message() returns this thread's message for that failure.
 *  - Nothing but a status crosses the boundary: no exception, abort(), exit() or stderr.
 *  - Outputs come last, through out-pointers. On failure an out-pointer is left untouched.
 *  - A *_create returns an owned handle; the matching *_destroy(NULL) is a no-op.
 *  - A handle is used by one host thread at a time; distinct handles are independent.
 *    Functions that touch no handle are safe from any thread unless stated otherwise.
 *  - Status codes, dtypes and memory tags are only ever appended, never renumbered.
 *
 * Handles: dt_options, dt_tensor, dt_mesh, and dt_module, dt_optimizer, dt_engine for
 * training. A handle made from another keeps it alive, so any destroy order works.
 */
#ifndef DTRAIN_DTRAIN_H
#define DTRAIN_DTRAIN_H

#include <stddef.h>
#include <stdint.h>

#if defined(DTRAIN_BUILDING)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Version                                                                              */
/* ------------------------------------------------------------------------------------ */

#define DT_VERSION_MAJOR 0
#define DT_VERSION_MINOR 1
#define DT_VERSION_PATCH 0
/** One integer for compile-time comparisons: major*10000 + minor*100 + patch. */
#define DT_VERSION_NUMBER (DT_VERSION_MAJOR * 10000 + DT_VERSION_MINOR * 100 + DT_VERSION_PATCH)

/** The library's version as "MAJOR.MINOR.PATCH" (static string; never free). Thread-safe. */
DT_API const char* dt_version(void);

/** The library's version as DT_VERSION_NUMBER of the build that is loaded. Thread-safe. */
DT_API int32_t dt_version_number(void);

/* ------------------------------------------------------------------------------------ */
/* Status and errors                                                                    */
/* ------------------------------------------------------------------------------------ */

typedef int32_t dt_status;
enum {
  DT_OK = 0,
  DT_ERR_INVALID_ARGUMENT = 1, /* a bad argument: the message names it and what is accepted */
  DT_ERR_OUT_OF_MEMORY = 2,    /* an allocation could not be satisfied; the process is healthy */
  DT_ERR_UNSUPPORTED = 3,      /* valid request this build or machine cannot do (e.g. no GPU) */
  DT_ERR_NOT_FOUND = 4,        /* a named thing (option key, file, tensor) does not exist */
  DT_ERR_IO = 5,               /* reading or writing a file failed */
  DT_ERR_COMM = 6,             /* a collective or transport failed */
  DT_ERR_TIMEOUT = 7,          /* a blocking operation passed its deadline */
  DT_ERR_ABORTED = 8,          /* the operation was cancelled by an abort */
  DT_ERR_INTERNAL = 9,         /* a bug in libdtrain: please report the message */
  DT_ERR_UNAVAILABLE = 10,     /* a service cannot take the request now (a server draining or failed) */
  DT_ERR_CANCELLED = 11        /* the call was cancelled (dt_cancel_request, or a stream callback asked to
                                  stop); the handles it used stay usable */
};

/** Name of a status code ("DT_OK", "DT_ERR_TIMEOUT", ...; "DT_ERR_UNKNOWN" for others).
 *  Static string; never free. Thread-safe. */
DT_API const char* dt_status_string(dt_status status);

/** Message of the calling thread's most recent failed call (empty string if none).
 *  Successful calls leave it unchanged. Valid until this thread's next failing call.
 *  Thread-safe (the message is thread-local). */
DT_API const char* dt_last_error_message(void);

/* ------------------------------------------------------------------------------------ */
/* Data types and memory tags                                                           */
/* ------------------------------------------------------------------------------------ */

typedef int32_t dt_dtype;
enum {
  DT_F32 = 1,  /* IEEE binary32 */
  DT_BF16 = 2, /* bfloat16: f32's exponent, 8-bit mantissa; f32->bf16 rounds to nearest even */
  DT_F16 = 3,  /* IEEE binary16 */
  DT_I32 = 4,
  DT_I64 = 5
};

/** Size in bytes of one element of `dtype`, or 0 if `dtype` is unknown. Thread-safe. */
DT_API size_t dt_dtype_size(dt_dtype dtype);

/** Name of `dtype` ("f32", "bf16", "f16", "i32", "i64"; "unknown" otherwise).
 *  Static string. Thread-safe. */
DT_API const char* dt_dtype_name(dt_dtype dtype);

/** What a block of memory holds. The memory ledger counts bytes per tag. */
typedef int32_t dt_mem_tag;
enum {
  DT_MEM_ALL = 0, /* in queries only: the sum over every tag */
  DT_MEM_PARAM = 1,
  DT_MEM_GRAD = 2,
  DT_MEM_OPTIMIZER = 3,
  DT_MEM_ACTIVATION = 4,
  DT_MEM_KV_CACHE = 5,
  DT_MEM_COMM_BUFFER = 6,
  DT_MEM_WORKSPACE = 7,
  DT_MEM_CHECKPOINT = 8 /* a save's staged copy while it is written (dt_engine_save_async) */
};

/** Name of a tag ("all", "param", "grad", "optimizer", "activation", "kv_cache",
 *  "comm_buffer", "workspace", "checkpoint"; "unknown" otherwise). Static string.
 *  Thread-safe. */
DT_API const char* dt_mem_tag_name(dt_mem_tag tag);

/* ------------------------------------------------------------------------------------ */
/* Options: an opaque bag of typed values under string keys                            */
/* ------------------------------------------------------------------------------------ */

/** Options are read by the call they are passed to, which rejects unknown keys and
 *  values of the wrong type with DT_ERR_INVALID_ARGUMENT, listing the accepted keys. */
typedef struct dt_options dt_options;

/** Creates an empty options bag. Caller owns *out; release with dt_options_destroy. */
DT_API dt_status dt_options_create(dt_options** out);

/** Releases `options`; NULL is a no-op. */
DT_API void dt_options_destroy(dt_options* options);

/** Set `key` (non-empty, copied) to a value, replacing any value of any type. */
DT_API dt_status dt_options_set_int(dt_options* options, const char* key, int64_t value);
DT_API dt_status dt_options_set_double(dt_options* options, const char* key, double value);
DT_API dt_status dt_options_set_bool(dt_options* options, const char* key, int32_t value);
/** `value` is copied. */
DT_API dt_status dt_options_set_string(dt_options* options, const char* key, const char* value);

/** Read `key`. DT_ERR_NOT_FOUND if absent; DT_ERR_INVALID_ARGUMENT if it holds another
 *  type (the message names the type it holds). get_double also reads an int value. */
DT_API dt_status dt_options_get_int(const dt_options* options, const char* key, int64_t* out);
DT_API dt_status dt_options_get_double(const dt_options* options, const char* key, double* out);
DT_API dt_status dt_options_get_bool(const dt_options* options, const char* key, int32_t* out);
/** *out is owned by `options`, valid until `key` is set again or `options` is destroyed. */
DT_API dt_status dt_options_get_string(const dt_options* options, const char* key,
                                       const char** out);

/** Number of keys in `options`. */
DT_API dt_status dt_options_count(const dt_options* options, int64_t* out);

/* ------------------------------------------------------------------------------------ */
/* Process-wide settings                                                                */
/* ------------------------------------------------------------------------------------ */

/** Applies process-wide settings. Accepted keys:
 *   "threads"            int >= 1: threads for CPU kernels (default: hardware cores).
 *                        Ranks that share cores should share them out, not add up.
 *   "memory_limit_bytes" int >= 0: cap on host bytes held by tensors (0 = no cap); an
 *                        allocation past it fails with DT_ERR_OUT_OF_MEMORY.
 *   "pool_cache_bytes"   int >= 0: most freed bytes kept for reuse (default 1 GiB).
 *  Either every key is applied or none is. Thread-safe; call it before heavy work. */
DT_API dt_status dt_configure(const dt_options* options);

/** Ends what libdtrain started in this process: MPI_Finalize, if libdtrain initialized MPI
 *  (an MPI the host initialized is the host's to finalize). libdtrain does this by itself
 *  when the process calls exit(); call it last from hosts whose runtime ends the process
 *  without running atexit handlers (Go), or mpirun reports the process as failed. After it
 *  (even if MPI was never used) an "mpi" mesh cannot be made (DT_ERR_COMM) and live ones
 *  fail their collectives. Once an "mpi" mesh of this process has failed (a timeout, an
 *  abort, a peer's failure), MPI_Finalize would wait for peers that may be stopped or gone:
 *  then MPI is left running and this returns DT_ERR_COMM; end the process, and mpirun ends
 *  the job (at exit, libdtrain calls MPI_Abort in that case instead of MPI_Finalize, with
 *  the exit status, or 1 for 0). Safe to call more than once, and a no-op in a build
 *  without MPI. Call it with no other call in flight. */
DT_API dt_status dt_shutdown(void);

/* ------------------------------------------------------------------------------------ */
/* Tensors                                                                              */
/* ------------------------------------------------------------------------------------ */

/** A dense, row-major, n-dimensional array on one device. */
typedef struct dt_tensor dt_tensor;

#define DT_MAX_DIMS 8

/** Creates a zero-filled tensor.
 *  dtype:   one of DT_F32, DT_BF16, DT_F16, DT_I32, DT_I64.
 *  shape:   `ndim` sizes, each >= 1; the element and byte counts must fit in 63 bits.
 *  ndim:    0 (a scalar; `shape` may be NULL) to DT_MAX_DIMS.
 *  device:  "cpu", or "cuda:N" (DT_ERR_UNSUPPORTED when the build or machine has no GPU N).
 *  options: NULL, or keys: "tag" (string: a dt_mem_tag_name other than "all"; default
 *           "workspace") saying what the ledger counts the bytes as.
 *  Caller owns *out; release with dt_tensor_destroy. Thread-safe. */
DT_API dt_status dt_tensor_create(dt_dtype dtype, const int64_t* shape, int32_t ndim,
                                  const char* device, const dt_options* options,
                                  dt_tensor** out);

/** Releases `tensor`; its bytes return to the pool. NULL is a no-op. */
DT_API void dt_tensor_destroy(dt_tensor* tensor);

/** Copies `bytes` bytes from host memory into `tensor`; `bytes` must equal its byte size. */
DT_API dt_status dt_tensor_copy_from_host(dt_tensor* tensor, const void* src, size_t bytes);

/** Copies the tensor's contents to host memory; `bytes` must equal its byte size. */
DT_API dt_status dt_tensor_copy_to_host(const dt_tensor* tensor, void* dst, size_t bytes);

/** Copies `src` into `dst`, converting the dtype (f32/bf16/f16/i32/i64 in any pair; floats
 *  to integers truncate toward zero). Shapes must have equal element counts. The two may be
 *  on different devices ("cpu" and "cuda:N", or two GPUs): the call returns once dst holds
 *  the values. */
DT_API dt_status dt_tensor_copy(const dt_tensor* src, dt_tensor* dst);

/** Queries. Out-pointers receive the value; strings are owned by the tensor. */
DT_API dt_status dt_tensor_dtype(const dt_tensor* tensor, dt_dtype* out);
DT_API dt_status dt_tensor_ndim(const dt_tensor* tensor, int32_t* out);
/** Writes the sizes into dims[0..ndim); `capacity` must be >= ndim. */
DT_API dt_status dt_tensor_shape(const dt_tensor* tensor, int64_t* dims, int32_t capacity);
DT_API dt_status dt_tensor_numel(const dt_tensor* tensor, int64_t* out);
DT_API dt_status dt_tensor_nbytes(const dt_tensor* tensor, size_t* out);
DT_API dt_status dt_tensor_device(const dt_tensor* tensor, const char** out);

/** The address of the tensor's first element, for sharing its memory without a copy
 *  (DLPack, numpy, a slice): a host address for "cpu", a device address for "cuda:N". The
 *  elements are dense and row-major, aligned to their size at least. Valid until the tensor
 *  is destroyed; writes through it change the tensor. Thread-safe. */
DT_API dt_status dt_tensor_data(const dt_tensor* tensor, void** out);

/** Called once when libdtrain no longer uses memory it was lent (see below). */
typedef void (*dt_release_callback)(void* user);

/** Creates a tensor over memory the caller lends instead of allocating (a numpy array, a
 *  DLPack tensor of another library): no copy; writes to either side are seen by the
 *  other. data: `ndim` dims as for dt_tensor_create, dense and row-major, aligned to the
 *  element size, on `device` ("cpu", or "cuda:N" with a device address), holding at least
 *  the tensor's byte size. release: NULL, or called with `user` exactly once, when the
 *  tensor is destroyed (on any thread), and also when this call fails: the lender's
 *  reference ends either way. The bytes are not counted in the memory ledger (they are not
 *  libdtrain's). Caller owns *out; release with dt_tensor_destroy. Thread-safe. */
DT_API dt_status dt_tensor_create_from_memory(dt_dtype dtype, const int64_t* shape, int32_t ndim,
                                              const char* device, void* data,
                                              dt_release_callback release, void* user,
                                              dt_tensor** out);

/** Fills a floating tensor with values keyed by (seed, name, element index): element i of
 *  a tensor equals element i of any other tensor filled with the same seed and name, so a
 *  shard filled at `offset` equals that slice of the whole. `name` is any string (copied).
 *  `offset` is the global index of element 0.
 *  normal: mean `a`, standard deviation `b` (b >= 0). uniform: in [a, b) (a <= b). */
DT_API dt_status dt_tensor_fill_normal(dt_tensor* tensor, uint64_t seed, const char* name,
                                       int64_t offset, float a, float b);
DT_API dt_status dt_tensor_fill_uniform(dt_tensor* tensor, uint64_t seed, const char* name,
                                        int64_t offset, float a, float b);

/* ------------------------------------------------------------------------------------ */
/* Operations on tensors (computed in f32 on the CPU, whatever the storage dtype)        */
/* ------------------------------------------------------------------------------------ */

/** c = op(a) @ op(b), where op transposes the last two dims when trans_* is nonzero.
 *  a: [..., M, K], b: [..., K, N] (or [K, N] shared by every batch), c: [..., M, N];
 *  batch dims of a and c must match. All three share one floating dtype and one device. */
DT_API dt_status dt_matmul(const dt_tensor* a, const dt_tensor* b, int32_t trans_a,
                           int32_t trans_b, dt_tensor* c);

/** y = softmax(x) over the last dim. x and y: same shape, floating dtype and device. */
DT_API dt_status dt_softmax(const dt_tensor* x, dt_tensor* y);

/* ------------------------------------------------------------------------------------ */
/* Memory ledger                                                                        */
/* ------------------------------------------------------------------------------------ */

/** Bytes held by tensors on `device` ("cpu" or "cuda:N") under `tag` (DT_MEM_ALL for the
 *  sum): now and the peak since start or the last dt_memory_reset_peak. Either out-pointer
 *  may be NULL. Counts requested bytes; pooled free blocks are not counted. A GPU this build
 *  or machine lacks is DT_ERR_UNSUPPORTED here and in every dt_memory_* call. Thread-safe. */
DT_API dt_status dt_memory_stats(const char* device, dt_mem_tag tag, int64_t* current_bytes,
                                 int64_t* peak_bytes);

/** The same for the memory of one rank: what the engine made on that rank's thread (its
 *  activations, buffers and shards; mesh tensors are not counted here), plus what a rank adopted
 *  (a data-parallel engine credits the host's model and optimizer to local rank 0). Zeros
 *  for a rank that never held memory on `device`. rank: 0 to 1023 (higher ranks are counted
 *  only in dt_memory_stats). Under mpirun a process holds its own rank's ledger only.
 *  Thread-safe. */
DT_API dt_status dt_memory_rank_stats(const char* device, int32_t rank, dt_mem_tag tag,
                                      int64_t* current_bytes, int64_t* peak_bytes);

/** Sets every tag's peak on `device` to its current value, for the device and each rank.
 *  Thread-safe. */
DT_API dt_status dt_memory_reset_peak(const char* device);

/** Writes the ledger of `device` as JSON ({"device":..,"tags":{"param":{"current":..,
 *  "peak":..},..},"pool_cached_bytes":..,"ranks":[{"rank":0,"tags":{..}},..]}) into buf (NUL-terminated, truncated to
 *  `capacity`); *needed receives the full length including the NUL. buf may be NULL when
 *  capacity is 0, to ask for the size. Thread-safe. */
DT_API dt_status dt_memory_report_json(const char* device, char* buf, size_t capacity,
                                       size_t* needed);

/** Number of devices of `kind` ("cpu" is always 1; "cuda" is 0 without a usable GPU).
 *  Thread-safe. */
DT_API dt_status dt_device_count(const char* kind, int32_t* out);

/** What this process runs on, as JSON: {"version":"..","cpu":{"cpu":name,"isa_level":
 *  "amx"|"avx512_bf16"|"avx512"|"avx2"|"scalar","isa":{"avx2_fma":..,"avx512":..,
 *  "avx512_bf16":..,"avx512_fp16":..,"amx_bf16":..},"max_isa_cap":null|level,"blas":..,
 *  "gemm":{"f32":..,"bf16":"amx-bf16"|"avx512-bf16"|"f32 (widened)","bf16_native":bool,
 *  "bf16_reason":..,"f16":..}},"cuda_devices":n}. The GEMM path is chosen once per process
 *  from the CPU found at run time (first call: up to ~30 ms when it measures the bf16 dot
 *  product against FMA); DTRAIN_CPU_BF16_GEMM=0|1 and DTRAIN_CPU_MAX_ISA=avx2|avx512|
 *  avx512_bf16|amx override it (docs/performance.md). Written as dt_memory_report_json
 *  writes. Thread-safe. */
DT_API dt_status dt_runtime_info_json(char* buf, size_t capacity, size_t* needed);

/* ------------------------------------------------------------------------------------ */
/* Mesh: ranks, mesh tensors and collectives                                            */
/* ------------------------------------------------------------------------------------ */

/* A device mesh: the world's ranks arranged on named axes, outer to inner "dp", "pp",
 * "ep", "cp", "tp" (a TP group is adjacent ranks). A process drives its LOCAL ranks: with
 * the "local" backend every rank is a thread of this process; with "mpi" this process is
 * one rank and every process makes the same calls in the same order (SPMD).
 *
 * Wherever an `axis` is asked for, it names a group of ranks: one axis ("dp", "pp", "ep",
 * "cp", "tp"), a product of axes in any order ("dp*cp"), or "world". The group of a rank
 * over `axis` is the ranks that differ from it only along those axes.
 *
 * Collectives run on every local rank at once; each uses its own piece of the mesh
 * tensors (see dt_tensor_create_on_mesh). Their `root` is a position in the group (for
 * one axis: the coordinate along it; for "world": the rank). A failed collective (timeout,
 * abort, a rank's error) puts the mesh in an error state that every later collective
 * reports; build a new mesh to go on. */
typedef struct dt_mesh dt_mesh;

/** Reduction of a collective; appended only. AVG is SUM divided by the group size
 *  (integers: truncated toward zero). The local backend folds ranks in group order, in f32
 *  for floating dtypes, so every rank gets bitwise the same result on every run. */
typedef int32_t dt_reduce_op;
enum { DT_REDUCE_SUM = 0, DT_REDUCE_AVG = 1, DT_REDUCE_MAX = 2, DT_REDUCE_MIN = 3, DT_REDUCE_PROD = 4 };

/** Creates a mesh.
 *  backend:    "local" (ranks are threads of this process) or "mpi" (one rank per
 *              process, started by mpirun; DT_ERR_UNSUPPORTED in a build without MPI).
 *  world_size: local: the number of ranks, 1 to 1024. mpi: 0 (the MPI world) or its size.
 *  options:    NULL, or keys: "dp", "pp", "ep", "cp", "tp" (int >= 1: axis sizes; an axis
 *              not given is 1, except dp, which is then the world size over the others;
 *              the product must equal the world size), "timeout_ms" (int > 0, default 300000: a collective
 *              waiting longer fails with DT_ERR_TIMEOUT), "check_args" (bool, default 1:
 *              ranks compare each collective's kind, dtype, count and root, and a mismatch
 *              is DT_ERR_COMM instead of corrupt data).
 *  Caller owns *out; release with dt_mesh_destroy. Thread-safe. */
DT_API dt_status dt_mesh_create(const char* backend, int32_t world_size, const dt_options* options,
                                dt_mesh** out);

/** Releases the handle. Mesh tensors made on it keep the mesh alive, so they stay usable
 *  and may be destroyed before or after it. NULL is a no-op. */
DT_API void dt_mesh_destroy(dt_mesh* mesh);

/** Number of ranks in the world (every process, every axis). */
DT_API dt_status dt_mesh_world_size(const dt_mesh* mesh, int32_t* out);

/** Number of ranks this process drives (local: the world size; mpi: 1). */
DT_API dt_status dt_mesh_local_rank_count(const dt_mesh* mesh, int32_t* out);

/** The global rank of local rank `local_index` (0 to dt_mesh_local_rank_count - 1). */
DT_API dt_status dt_mesh_local_rank(const dt_mesh* mesh, int32_t local_index, int32_t* rank);

/** Number of ranks in a group over `axis` ("tp": the TP size; "world": the world size). */
DT_API dt_status dt_mesh_axis_size(const dt_mesh* mesh, const char* axis, int32_t* size);

/** Position of global rank `rank` in its group over `axis`: for one axis, its coordinate
 *  along it; for "world", the rank itself. */
DT_API dt_status dt_mesh_coord(const dt_mesh* mesh, int32_t rank, const char* axis, int32_t* coord);

/** The backend's name, "local" or "mpi" (static string; never free). */
DT_API dt_status dt_mesh_backend(const dt_mesh* mesh, const char** name);

/** Creates a mesh tensor: one zero-filled CPU tensor of `shape` (a "piece") for each local
 *  rank of `mesh` (local backend: the world size; mpi: 1). dtype, shape and ndim are as for
 *  dt_tensor_create. options: NULL, or "tag" as for dt_tensor_create.
 *  The dt_tensor_* queries describe one piece. Calls that read or write data (host copies,
 *  dt_tensor_copy, fills, ops) accept a mesh tensor only when it has one piece; otherwise
 *  they fail with DT_ERR_INVALID_ARGUMENT: use dt_tensor_piece. The tensor keeps `mesh`
 *  alive. Caller owns *out; release with dt_tensor_destroy. */
DT_API dt_status dt_tensor_create_on_mesh(dt_mesh* mesh, dt_dtype dtype, const int64_t* shape,
                                          int32_t ndim, const dt_options* options, dt_tensor** out);

/** Number of pieces: one per local rank for a mesh tensor; 1 for any other tensor. */
DT_API dt_status dt_tensor_piece_count(const dt_tensor* tensor, int32_t* out);

/** A new plain tensor that views piece `local_index` of `tensor` (the piece of local rank
 *  `local_index`; for a plain tensor only 0, the tensor itself). It shares the storage and
 *  keeps it alive: writes through either are seen by both. It is not a mesh tensor, so
 *  collectives reject it. Caller owns *out; release with dt_tensor_destroy. */
DT_API dt_status dt_tensor_piece(const dt_tensor* tensor, int32_t local_index, dt_tensor** out);

/* Collectives. Tensors must be mesh tensors of this `mesh`; send and recv share a dtype.
 * Sizes are per piece; n is dt_mesh_axis_size(mesh, axis). Each call blocks until every
 * local rank has finished. The mesh handle and the tensors are used by one host thread. */

/** In place: every rank's piece becomes op over its group's pieces. */
DT_API dt_status dt_mesh_all_reduce(dt_mesh* mesh, const char* axis, dt_tensor* tensor,
                                    dt_reduce_op op);

/** recv = the group's send pieces, concatenated in group order; recv numel = n * send numel. */
DT_API dt_status dt_mesh_all_gather(dt_mesh* mesh, const char* axis, const dt_tensor* send,
                                    dt_tensor* recv);

/** recv = block `coord` (the rank's position in the group) of op over the group's send
 *  pieces, each seen as n equal blocks; send numel = n * recv numel. */
DT_API dt_status dt_mesh_reduce_scatter(dt_mesh* mesh, const char* axis, const dt_tensor* send,
                                        dt_tensor* recv, dt_reduce_op op);

/** In place: every rank's piece becomes the piece of the group's `root` (0 to n - 1). */
DT_API dt_status dt_mesh_broadcast(dt_mesh* mesh, const char* axis, dt_tensor* tensor, int32_t root);

/** The recv piece of the group's `root` becomes op over the group's send pieces; other recv
 *  pieces are left as they were. Equal numel; send and recv may be the same tensor. */
DT_API dt_status dt_mesh_reduce(dt_mesh* mesh, const char* axis, const dt_tensor* send,
                                dt_tensor* recv, dt_reduce_op op, int32_t root);

/** Equal splits: each send piece is n equal blocks; block j goes to the group's rank j,
 *  whose recv holds what it got in group order. Equal numel, a multiple of n; send and
 *  recv are distinct tensors. */
DT_API dt_status dt_mesh_all_to_all(dt_mesh* mesh, const char* axis, const dt_tensor* send,
                                    dt_tensor* recv);

/** Returns once every rank of each group over `axis` has arrived. */
DT_API dt_status dt_mesh_barrier(dt_mesh* mesh, const char* axis);

/** Puts the mesh in its error state: every collective waiting on it returns
 *  DT_ERR_ABORTED within a second, and so does every later one. Callable from any host
 *  thread while another uses the mesh: the one exception to "one thread per handle". */
DT_API dt_status dt_mesh_abort(dt_mesh* mesh);

/** Comm ledger of local rank `rank` on the group over `axis`: the calls, bytes this rank
 *  contributed, and seconds of collective `kind` ("all_reduce", "all_gather",
 *  "reduce_scatter", "broadcast", "reduce", "all_to_all", "send", "recv", "barrier").
 *  Zeros if that rank never used `axis`. Any out-pointer may be NULL. */
DT_API dt_status dt_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis, const char* kind,
                                    int64_t* calls, int64_t* bytes, double* seconds);

/** The wire bytes of the same calls: what a bandwidth-optimal algorithm delivers to this
 *  rank (an all-reduce of S bytes over n ranks counts 2(n-1)/n S; a reduce-scatter or an
 *  all-gather (n-1)/n of the full buffer; a broadcast S on every rank but the root): the
 *  volume the ZeRO paper compares, so ZeRO-3's step moves 1.5x DDP's. */
DT_API dt_status dt_mesh_comm_wire_bytes(dt_mesh* mesh, int32_t rank, const char* axis,
                                         const char* kind, int64_t* wire_bytes);

/** Writes the comm ledger of every local rank and every axis used so far as JSON
 *  ({"backend":..,"ranks":[{"rank":r,"axes":{"dp":{"all_reduce":{"calls":..,"bytes":..,
 *  "seconds":..},..},..}},..]}) into buf, as dt_memory_report_json does (NUL-terminated,
 *  truncated to `capacity`; *needed receives the full length including the NUL; buf may
 *  be NULL when capacity is 0). */
DT_API dt_status dt_mesh_comm_report_json(dt_mesh* mesh, char* buf, size_t capacity, size_t* needed);

/** Hang forensics: the last 64 collectives of each local rank (all axes, oldest first) and
 *  the mesh's error, as JSON ({"backend":..,"failure":null or {"status":"DT_ERR_TIMEOUT",
 *  "message":..},"ranks":[{"rank":r,"calls":[{"seq":..,"kind":"all_reduce","axis":"dp",
 *  "bytes":..,"start_unix_s":..,"seconds":..,"status":"ok"},..]},..]}). "seq" numbers the
 *  calls of one rank on one axis from 1, as timeout messages do; "start_unix_s" is wall-clock
 *  time, so ranks of different processes line up; "status" is "running" for a call that has
 *  not ended (the one a hung rank is in), else "ok", "timeout", "aborted", "comm", ... Works
 *  on a failed mesh. Written into buf as dt_mesh_comm_report_json does. */
DT_API dt_status dt_mesh_comm_history_json(dt_mesh* mesh, char* buf, size_t capacity, size_t* needed);

/* ------------------------------------------------------------------------------------ */
/* Modules: models with named parameters                                                */
/* ------------------------------------------------------------------------------------ */

/** A model: a GPT, an MLP or a sequential container, its parameters on the CPU (f32, or a GPT's
 *  "precision"; a GPT may live on a GPU instead: its "device"). Handles made from it
 *  (optimizers, engines, parameter views) keep it alive, so any destroy order works. */
typedef struct dt_module dt_module;

/** Creates a GPT. config: NULL (the "gpt-small" shape) or keys:
 *   "preset"     string: the starting shape, which the keys below override: "gpt-tiny"
 *                (2 layers, d_model 64, 2 heads, context 64, byte vocab), "gpt-small"
 *                (6 layers, d_model 384, 6 heads, context 256, byte vocab), "llama-tiny"
 *                (gpt-tiny with rmsnorm, rope, swiglu, no bias, untied embeddings),
 *                "mixtral-tiny" (llama-tiny with 4 experts of d_ff 128, top 2),
 *                "qwen2-moe-tiny" (mixtral-tiny with qkv_bias, moe_renormalize false and a
 *                gated shared expert of width 128).
 *   "vocab_size" int, 1 to 2^24.   "context"  int, 1 to 2^22.   "d_model"  int, 1 to 2^17.
 *   "n_layer", "n_head"  int, 1 to 4096.
 *   "n_kv_head"  int, 0 to 4096 (0: n_head; fewer: grouped-query; must divide n_head).
 *   "d_ff"       int, 0 to 2^20 (0: 4 * d_model).
 *   "norm"       "layernorm" | "rmsnorm".   "pos"  "learned" | "rope".
 *   "act"        "gelu" | "swiglu".          "tied_embeddings", "bias"  bool.
 *   "qkv_bias"   bool: biases on q, k and v even without "bias" (Qwen2).
 *   "norm_eps"   double, 0 to 1 (default 1e-5).   "rope_base"  double > 0 (default 10000).
 *   "sliding_window" int, 0 (none, the default) to 2^22: attention over the last this many
 *                positions (Mistral); the context may not exceed it.
 *   "experts"    int, 0 (dense, the default) to 1024: a mixture of experts in every block,
 *                this many MLPs of d_ff each and a router (Mixtral). With experts:
 *   "top_k"      int, 1 to experts (default 2): the experts each token goes to.
 *   "moe_gating" "softmax" (default) | "sigmoid": the router's scores.
 *   "moe_renormalize" bool (default true): the top_k gates divided by their sum.
 *   "moe_aux_coef" double 0 to 1 (default 0.01): the load-balancing loss's coefficient.
 *   "moe_z_coef" double 0 to 1 (default 0.001): the router z-loss's coefficient.
 *   "moe_capacity" double, 0 (dropless, the default) or 0.01 to 1024: the capacity factor;
 *                an expert takes at most ceil(factor * tokens * top_k / experts) tokens, the
 *                earliest first, and drops the rest. With tp > 1 experts need
 *                "sequence_parallel" (each tp rank routes its own token rows).
 *   "moe_shared_d_ff" int, 0 (none, the default) to 2^20: a shared expert of this width
 *                that every token goes through beside its top_k (Qwen2-MoE, DeepSeek).
 *   "moe_shared_gate" bool (default false; needs moe_shared_d_ff): the shared expert's
 *                output scaled per token by sigmoid(x . w) (Qwen2-MoE's shared_expert_gate).
 *   "seed"       int: parameters are a function of (seed, parameter name).
 *   "precision"  "f32" (default) | "bf16" | "f16": the dtype of parameters, gradients,
 *                activations and the KV cache (math is f32; bf16/f16 parameters are the f32
 *                init rounded; optimizers keep f32 masters; engines loss-scale f16).
 *   "device"     "cpu" (default) | "cuda:N": where parameters, gradients, optimizer state,
 *                activations and the KV cache live, and where its math runs (CUDA kernels
 *                and cuBLAS). Batches and prompts still come from the host. DT_ERR_UNSUPPORTED
 *                when this build has no CUDA or the machine no GPU N.
 *  n_head must divide d_model. Caller owns *out; release with dt_module_destroy. Thread-safe. */
DT_API dt_status dt_module_create_gpt(const dt_options* config, dt_module** out);

/** Number of scalar parameters the GPT that dt_module_create_gpt(config) makes would hold
 *  (what dt_module_param_count reports for it), computed from the config without building
 *  or allocating anything: size a model before making it, or one too large for this
 *  machine. Same keys and the same DT_ERR_INVALID_ARGUMENT messages as dt_module_create_gpt;
 *  "device" must be well formed but need not exist here. Thread-safe. */
DT_API dt_status dt_module_gpt_param_count(const dt_options* config, int64_t* out);

/** The parallel plan of the GPT that dt_module_create_gpt(config) makes, by formula and
 *  without building it, as JSON (written as dt_memory_report_json writes): the parameters
 *  one tensor-parallel rank holds ("params_per_tp_rank", "replicated_over_tp"), per-rank
 *  model states of DDP and ZeRO-1/2/3 over dp ("stages": weights, grads, optimizer, and dp
 *  wire bytes per step), the tp axis's wire bytes per block, micro-batch and step
 *  ("tp_comm"), and the norm-region activations per block ("activations", split by
 *  sequence parallelism). plan: NULL or keys "dp" (1 to 1048576, default 1), "tp" (1 to
 *  1024, default 1), "sequence_parallel" (bool, needs tp > 1), "micro_batch" (sequences
 *  per rank, default 1), "seq_len" (tokens per sequence, default 0: the context),
 *  "accumulation" (micro-batches per step, default 1: a pipeline's M), "ep" (1 to 1024:
 *  a mixture of experts' experts split over ep ranks; the JSON's "moe": experts and
 *  parameters per rank, all-to-all bytes for a uniform router), "expert_load" and
 *  "expert_load_peak" (with "cluster": a mixture's busiest ep rank's received rows over an
 *  even share, 1 to 1024, as `dtrain train --report` measures them for each ep: in a
 *  typical step, which prices the time, and at each block's most, which prices the memory;
 *  default 0: unstated, an even share dropless, the capacity bound with a capacity factor;
 *  the peak defaults to "expert_load"; with "search" applied to every ep), "cp" (1 to 1024: context
 *  parallelism, seq_len a multiple of 2 cp; the JSON's "cp": tokens per rank, ring bytes
 *  per layer, micro-batch and step, a block's activations per rank and at cp 1). Pipeline: "pp"
 *  (1 to 1024, default 1), and with pp > 1 only (else DT_ERR_INVALID_ARGUMENT) the keys
 *  of dt_engine_create "pp_schedule", "virtual_stages", "pp_blocks", and
 *  "timeline_trace" (bool). With pp > 1 the JSON has "pipeline": the schedule, P, M, v,
 *  the stage boundaries (placed as dt_engine_create places them), per pp rank its blocks,
 *  parameters, model states per ZeRO stage, tied-table copy and activations at the
 *  simulated peak; "bubble_formula" and the simulated "bubble_fraction",
 *  "activation_peak" per rank (simulated) and "activation_peak_formula" (rank 0), the pp
 *  wire bytes per step, the text "timeline", and with "timeline_trace" the simulated
 *  Chrome trace ("chrome_trace"). DT_ERR_INVALID_ARGUMENT names what does not split over
 *  tp, an unknown schedule, or more stages than blocks. Thread-safe. */
DT_API dt_status dt_plan_json(const dt_options* config, const dt_options* plan, char* buf, size_t capacity,
                              size_t* needed);

/*  The cost model (with "cluster" in dt_plan_json's plan): "cluster" is a built-in name
 *  ("a100-node", "h100-node", "h200-node", "cpu-default"; ":N" after it for N hosts, e.g.
 *  "h100-node:16") or a cluster's JSON (what dt_cluster_calibrate_json writes; every
 *  field in docs/planner.md). With it the JSON gains "cost": per pp rank the bytes it holds
 *  by ledger tag at its peak ("ranks"[i]."memory", "peak_bytes"), the predicted "step_s",
 *  "tokens_per_s", "mfu", the step's parts ("time": compute, recompute, tp communication,
 *  exposed dp communication, pipeline bubble, optimizer; with "ep" the experts' all-to-all,
 *  with "cp" the ring's exposed transfers) and "fits" (the peak within a
 *  device's memory). Keys read only with "cluster": "zero" (0 to 3, default 0),
 *  "recompute" (bool: activation checkpointing per block), "in_process" (bool, default
 *  true: the ranks are threads of one process, as the local backend runs them; false: a
 *  process each). "search" (bool) instead returns {"search": ...}: every layout of the
 *  cluster's devices (dp x tp x pp, tp within a host, x ep for a mixture of experts, x cp
 *  for a dense model; schedules, ZeRO stage, micro-batch size and count for "global_batch"
 *  sequences, sp, recompute) costed, those that do not
 *  fit dropped, the "top" (1 to 1000, default 5) fastest with what each loses by against
 *  the first. DT_ERR_NOT_FOUND for an unknown cluster name; DT_ERR_INVALID_ARGUMENT
 *  naming a malformed cluster's field, or a cost-model key without "cluster".
 *
 *  Serving (with "cluster" and "serve": true): {"serve_cost": ...} for the layout "dp"
 *  (replicas) x "tp" x "pp": per pp rank its weights, KV cache and workspace bytes, the
 *  batch of running sequences per replica ("batch"; 0 or absent: the most that fit, cut to
 *  meet the latency target), the mean inter-token latency "itl_s" (a decode step plus its
 *  share of the replacing requests' prefills; "time" has its parts), a lone request's
 *  "ttft_s", and "tokens_per_s" of all replicas. Its keys: "prompt" (tokens per request,
 *  default min(512, context / 2)), "output" (generated tokens, default min(128, the rest of
 *  the context)), "batch", "max_num_seqs" (default 256), "max_batched_tokens" (a prefill
 *  chunk; default 256 on a CPU cluster, 2048 on GPUs), "block_size" (default 16), "memory_fraction" (of a device, more
 *  than 0 to 1, default 0.9), "itl_target_s" and "ttft_target_s" (seconds, 0: none),
 *  "in_process". With "search": {"serve_search": ...}: every replicas x tp x pp of the
 *  cluster's devices at its best batch, those that do not fit or miss a target dropped, the
 *  "top" by tokens per second with what each loses by. The training keys ("zero",
 *  "micro_batch", "pp_schedule", ...) are refused with "serve", and the layout's keys with
 *  "search", by name. */

/** This machine as a cluster for dt_plan_json's "cluster", measured: GEMM, attention and
 *  elementwise rates on one core and on all of them, and the local backend's all-reduce
 *  latency and bandwidth between two rank threads (a few seconds; the best of a few
 *  repeats after a warm-up). Written as dt_plan_json writes. options: NULL or "backend":
 *  "local" (the default: the above) or "mpi" (under mpirun -np 2, called by both processes:
 *  {"processes": the same collectives between the two processes through Open MPI}, the
 *  link a CPU cluster's ranks use with in_process false). Not thread-safe with other heavy
 *  work: it times the cores. */
DT_API dt_status dt_cluster_calibrate_json(const dt_options* options, char* buf, size_t capacity, size_t* needed);

/** The field-by-field median of several measurements of one machine, as a cluster for
 *  dt_plan_json: `clusters` is a JSON array of 1 to 64 clusters (what
 *  dt_cluster_calibrate_json writes, each checked as "cluster" is). Each rate, fitted figure,
 *  GEMM-curve point and link figure is the median over the clusters (a link over those that
 *  measured it: "processes" only where --backend mpi added it); names, flags and counts are
 *  the first's. On a shared host single calibrations differ by 10-20% in their fitted figures
 *  (differences of best-of timings); the median of a few holds still. DT_ERR_INVALID_ARGUMENT
 *  names the first cluster that does not parse or check. Written as dt_plan_json writes.
 *  Thread-safe. */
DT_API dt_status dt_cluster_median_json(const char* clusters, char* buf, size_t capacity, size_t* needed);

/** A pipeline schedule as data, and its simulation, as JSON (written as dt_plan_json
 *  writes), for no model in particular: "actions" per pp rank, in order ("F3" forward of
 *  micro-batch 3, "B3" its backward, "Bi3"/"W3" a split backward's input and weight
 *  passes, "sendA3"/"recvA3" the activations, "sendG3"/"recvG3" their gradients; "c1" after
 *  a name: chunk 1 of an interleaved rank), and the simulator's run of them (eager sends,
 *  blocking receives, forward cost 1 and backward 2 per stage unless given): "makespan",
 *  "bubble_fraction" (idle share of P x the makespan) next to "bubble_formula",
 *  "activation_peak" per rank (micro-batches, times chunks, alive at once) next to
 *  "activation_peak_formula" (rank 0), "utilization" (1 - bubble), and the text
 *  "timeline". options: keys "pp" (stages, 1 to 1024, required), "micro_batches" (1 to
 *  65536, default 1), "pp_schedule" ("gpipe", "1f1b" (default), "interleaved", "zb-h1",
 *  "forward": forward only), "virtual_stages" (chunks per rank, default 1; >= 2 for
 *  interleaved, which needs micro_batches divisible by pp), "forward_cost" and
 *  "backward_cost" (> 0; a split backward's passes cost half of it each), "timeline_trace"
 *  (bool: the simulated Chrome trace as "chrome_trace"). pp x micro_batches x
 *  virtual_stages is at most 1048576 (the simulation's size, as dt_plan_json bounds it).
 *  DT_ERR_INVALID_ARGUMENT names the key and what is accepted; a schedule that would deadlock could not be built here (the
 *  simulator proves each generator's). Thread-safe. */
DT_API dt_status dt_pipeline_schedule_json(const dt_options* options, char* buf, size_t capacity, size_t* needed);

/** Creates an MLP. config keys: "sizes" (required string of comma-separated ints >= 1,
 *  at least two: "in,hidden...,out", e.g. "4,32,1"), "act" ("gelu" | "silu", between
 *  layers), "seed" (int). Caller owns *out; release with dt_module_destroy. Thread-safe. */
DT_API dt_status dt_module_create_mlp(const dt_options* config, dt_module** out);

/** Releases the handle; the model lives on while an optimizer, engine or parameter view
 *  made from it does. NULL is a no-op. */
DT_API void dt_module_destroy(dt_module* module);

/** Number of scalar parameters (elements of every parameter tensor). */
DT_API dt_status dt_module_param_count(dt_module* module, int64_t* out);

/** Number of parameter tensors; dt_module_param_name takes indexes 0 to this - 1. */
DT_API dt_status dt_module_param_count_tensors(dt_module* module, int64_t* out);

/** Name of parameter tensor `index` ("wte.weight", "blocks.0.attn.qkv.weight", ...), in a
 *  fixed order. *out is owned by the module and valid while it lives. */
DT_API dt_status dt_module_param_name(dt_module* module, int64_t index, const char** out);

/** A new tensor handle that views parameter `name` (DT_ERR_NOT_FOUND if there is none):
 *  reads see the current weights and dt_tensor_copy_from_host writes them, on every
 *  layout of an engine made over the module: where its mesh splits the model (tp, pp), a
 *  read first gathers the parts (on a local mesh; under mpirun it fails with
 *  DT_ERR_UNSUPPORTED, as gathering is collective: dt_engine_save and read the
 *  checkpoint instead), and a write reaches every replica or part, and the optimizer's
 *  master copy, at the engine's next call. Under ZeRO (zero >= 1 with dp > 1) writes fail
 *  with DT_ERR_UNSUPPORTED. It keeps the module alive. Read and write only between steps,
 *  not while another thread drives the engine. Caller owns *out; release with
 *  dt_tensor_destroy. */
DT_API dt_status dt_module_param(dt_module* module, const char* name, dt_tensor** out);
/* (Under a ZeRO-3 engine a block's values exist only while it runs, or after
 *  dt_engine_generate until the next step: otherwise dt_module_param fails and says so. A
 *  view taken while whole keeps the gathered values alive, not the live shard.) */

/* ------------------------------------------------------------------------------------ */
/* Optimizers                                                                           */
/* ------------------------------------------------------------------------------------ */

/** Updates the parameters of one module. Keeps the module alive. */
typedef struct dt_optimizer dt_optimizer;

/** Creates an optimizer over every parameter of `module`.
 *  kind: "adamw" (decoupled weight decay, bias correction) or "sgd" (PyTorch semantics).
 *  options: NULL or, for "adamw": "lr" (>= 0, default 1e-3), "beta1", "beta2" ([0, 1),
 *  defaults 0.9, 0.999), "eps" ((0, 1], default 1e-8), "weight_decay" (>= 0, default
 *  0.01); for "sgd": "lr" (>= 0, default 1e-2), "momentum" ([0, 1], default 0),
 *  "weight_decay" (>= 0, default 0), "nesterov" (bool, needs momentum > 0). Both:
 *  "offload" (bool, default false): for a module on a GPU, keep the f32 master weights and
 *  the moments in host memory and update them with the CPU kernels (ZeRO-Offload), moving
 *  gradients to the host and values back each step; the GPU then holds no optimizer
 *  bytes. No effect for a CPU module.
 *  Caller owns *out; release with dt_optimizer_destroy. */
DT_API dt_status dt_optimizer_create(dt_module* module, const char* kind, const dt_options* options,
                                     dt_optimizer** out);

/** Releases the handle; an engine using the optimizer keeps it alive. NULL is a no-op. */
DT_API void dt_optimizer_destroy(dt_optimizer* optimizer);

/* ------------------------------------------------------------------------------------ */
/* Engine: training, evaluation, generation and checkpoints                             */
/* ------------------------------------------------------------------------------------ */

/** Trains a GPT module with an optimizer of it. Keeps the mesh, module and optimizer
 *  alive. One host thread at a time, including the module and optimizer it uses. */
typedef struct dt_engine dt_engine;

/** Creates an engine.
 *  mesh:      NULL (this process alone), or a mesh whose axes above 1 are "dp", "pp" and
 *             "tp" (others: DT_ERR_INVALID_ARGUMENT naming the axis). dp: data parallel
 *             training (DDP). Every process passes the same GLOBAL batch to
 *             dt_engine_train_step; dp rank r trains on rows [r B/dp, (r+1) B/dp), and the
 *             gradients are all-reduced in buckets while backward runs. A process driving
 *             several ranks (local backend) trains one replica per rank; `module` is local
 *             rank 0's, which evaluation, generation and saving read (replicas stay equal).
 *             tp: tensor parallel, each block's attention heads and MLP features split
 *             over tp; the replicas hold the parts, and `module` gets the whole trained
 *             weights back before generation and saving (collective over tp: every
 *             process of an mpirun calls them). Checkpoints load into any layout.
 *             ZeRO ("zero" > 0) shards over dp inside each tp group. The vocabulary is
 *             split over tp too (padded when it does not divide), and with fewer KV heads
 *             than tp ranks each KV head is held by the ranks that read it.
 *             pp: pipeline parallel, the blocks split into pp stages in a row (each pp
 *             rank holds its stage's blocks; the embedding on the first, the final norm
 *             and head on the last), the micro-batches run by the "pp_schedule";
 *             dt_plan_json with "pp" shows the placement, the bubble and the timeline.
 *             CPU ranks only for now (a GPU model: DT_ERR_UNSUPPORTED).
 *  module:    a GPT (dt_module_create_gpt). optimizer: created over `module`.
 *  options:   NULL or keys: "micro_batches" (int >= 1, default 1: gradient accumulation
 *             steps per train step; must divide the batch), "max_grad_norm" (double; <= 0,
 *             the default, does not clip), "schedule" ("constant", the default, or
 *             "cosine": linear warmup then cosine decay), and for "cosine" only:
 *             "warmup_steps" (int >= 0), "total_steps" (int > warmup_steps),
 *             "min_lr_ratio" ([0, 1], default 0.1). The peak lr is the optimizer's "lr".
 *             Dynamic loss scaling, accepted for any model and used only for "f16" ones:
 *             "loss_scale_init" (double > 0, default 65536), "loss_scale_growth_interval"
 *             (int >= 1, default 2000: good steps before the scale doubles; an overflow
 *             skips the step and halves it). Data parallel: "bucket_bytes" (int >= 1,
 *             default 25 MiB: gradients per all-reduce), "zero" (0, the default: DDP,
 *             replicated state; 1: optimizer state sharded over dp; 2: + gradients;
 *             3: + parameters, each block gathered just before it runs, as FSDP does).
 *             Tensor parallel: "sequence_parallel" (bool, default false; needs a tp axis
 *             > 1): Megatron sequence parallelism, the norms and the residual stream split
 *             over the tokens of each micro-batch (B x T must divide by tp), all-gathers
 *             and reduce-scatters in place of the blocks' all-reduces.
 *             Pipeline parallel (a pp axis > 1; "micro_batches" is the pipeline's M):
 *             "pp_schedule" ("1f1b", the default, "gpipe", "interleaved" or "zb-h1"),
 *             "virtual_stages" (1 to 64, default 1: model chunks per pp rank;
 *             "interleaved" needs >= 2 and micro_batches divisible by pp), "pp_blocks"
 *             (string "3,1": the blocks of each of the pp x virtual_stages stages in
 *             stream order; default: balanced by cost, the head counted as
 *             vocab / (12 d_model) blocks). "zero" = 3 with pp > 1 is refused.
 *             With zero > 0 the optimizer's own state is released to the shards; train
 *             steps, evaluation, generation and save are collective over dp (every
 *             process of an mpirun calls them). Checkpoints load into any layout.
 *  Caller owns *out; release with dt_engine_destroy. */
DT_API dt_status dt_engine_create(dt_mesh* mesh, dt_module* module, dt_optimizer* optimizer,
                                  const dt_options* options, dt_engine** out);

/** Releases the engine (and its references to the mesh, module, optimizer). NULL: no-op. */
DT_API void dt_engine_destroy(dt_engine* engine);

/** One optimizer step on a batch. inputs, targets: i32 [B, T] CPU tensors of the same
 *  shape, token ids in [0, vocab_size) (targets may also hold -1: no loss there); B must
 *  be divisible by dp x micro_batches.
 *  *loss_out (may be NULL) receives the mean loss over the batch before the update. */
DT_API dt_status dt_engine_train_step(dt_engine* engine, const dt_tensor* inputs,
                                      const dt_tensor* targets, double* loss_out);

/** The last successful train step's metrics as one JSON line ({"step":..,"loss":..,
 *  "grad_norm":..,"lr":..,"tokens":..,..}; "" before any step), written as
 *  dt_memory_report_json writes (NUL-terminated, truncated to `capacity`; *needed gets
 *  the full length including the NUL; buf may be NULL when capacity is 0). */
DT_API dt_status dt_engine_last_stats_json(dt_engine* engine, char* buf, size_t capacity,
                                           size_t* needed);

/** The mean loss of a batch (as for dt_engine_train_step) without changing anything. */
DT_API dt_status dt_engine_eval(dt_engine* engine, const dt_tensor* inputs,
                                const dt_tensor* targets, double* loss_out);

/** Continues `n_prompts` (>= 1) prompts. Prompt i has prompt_lengths[i] (>= 1) tokens,
 *  stored one prompt after another in prompt_tokens. options: NULL or keys:
 *  "max_new_tokens" (int >= 0, default 16; prompt length + it must fit the context),
 *  "temperature" (>= 0, default 0: greedy, lowest id on ties), "top_k" (int >= 0, 0: all),
 *  "top_p" ((0, 1], default 1), "seed" (int: sampling depends only on it, the step and the
 *  prompt's index), "stop_token" (int, default -1: none; a prompt ends after emitting it),
 *  "stop_tokens" (string of ids, "3,7": several, such as a model's end-of-turn ids).
 *  out_tokens holds n_prompts rows of out_capacity_per_prompt (>= max_new_tokens) ids;
 *  row i receives prompt i's new tokens and out_lengths[i] their count. Nothing is written
 *  on failure. On an engine over a tp axis > 1 it runs on the replicas, each with its part
 *  of the model and of the KV cache (sharded by heads), the same tokens as one rank; it is
 *  then collective (every process of an mpirun calls it). */
DT_API dt_status dt_engine_generate(dt_engine* engine, const int32_t* prompt_tokens,
                                    const int64_t* prompt_lengths, int32_t n_prompts,
                                    const dt_options* options, int32_t* out_tokens,
                                    int64_t out_capacity_per_prompt, int64_t* out_lengths);

/** Saves parameters and optimizer state (step included) as "<path_stem>.index.json" and
 *  its data files, e.g. path_stem "ckpt/run1"; the directory is created if missing. One
 *  rank writes "<path_stem>.<generation>.safetensors". On a mesh every rank writes what it
 *  holds to its own "<path_stem>.<generation>.r<rank>.safetensors" (its ZeRO shards, its
 *  tp part, its pipeline stage's and experts' tensors; a tensor ranks hold alike, once),
 *  with no gather, in parallel; the world's rank 0 writes the index last. Every chunk has
 *  a checksum, checked whenever it is read. Collective: every process of an mpirun calls
 *  it (they must share the directory). Crash-safe: the last completed save stays
 *  loadable; a failure on any rank fails it on every rank. */
DT_API dt_status dt_engine_save(dt_engine* engine, const char* path_stem);

/** dt_engine_save without the wait: the state is copied to a staging buffer (this rank's
 *  share, counted under DT_MEM_CHECKPOINT) and the call returns; each rank's file is written
 *  by a thread of its own while training goes on. The save commits (its index written) at
 *  the first dt_engine_train_step, dt_engine_save(_async), dt_engine_load or
 *  dt_engine_save_wait that finds every rank's write done, or when the engine is destroyed.
 *  A failed write is returned by that call (DT_ERR_IO), and the last committed checkpoint
 *  stands: never lost. One save is in flight at a time (a second waits for the first).
 *  The copy itself runs on the writer's thread during the next step's forward and
 *  backward (which only read the state); that step's update waits for it, so the files
 *  hold exactly the state at the call. Do not write through dt_module_param views until
 *  the next dt_engine_train_step or dt_engine_save_wait has returned. The staging buffers
 *  are kept for the next save. Collective, as dt_engine_save. */
DT_API dt_status dt_engine_save_async(dt_engine* engine, const char* path_stem);

/** Waits for the engine's save in flight, commits it and returns its result (DT_OK when
 *  none is in flight). Collective. */
DT_API dt_status dt_engine_save_wait(dt_engine* engine);

/** Loads what dt_engine_save wrote at `path_stem` into the engine's parameters and
 *  optimizer, whatever layout saved it (one rank or any mesh, any ZeRO stage): each rank
 *  reads only the parts of the tensors it holds, optimizer state resharded as its
 *  parameters are. Collective on a mesh. Everything is validated (checksums included)
 *  before anything is written, on every rank, so on failure nothing changed: DT_ERR_IO for
 *  a missing, unreadable or corrupt file, DT_ERR_NOT_FOUND for a tensor it lacks,
 *  DT_ERR_INVALID_ARGUMENT for one of another dtype or shape. */
DT_API dt_status dt_engine_load(dt_engine* engine, const char* path_stem);

/** The current optimizer step: updates taken so far (restored by dt_engine_load). */
DT_API dt_status dt_engine_step(dt_engine* engine, int64_t* out);

/** Receives each generated token as soon as it is chosen: `prompt_index` is the prompt it
 *  continues (0 to n_prompts - 1). Called on the thread that called generate.
 *  (Version 1: it cannot stop the generation; dt_token_callback_v2 can.) */
typedef void (*dt_token_callback)(void* user, int32_t prompt_index, int32_t token);

/** dt_engine_generate, calling on_token (required) with every new token in the order the
 *  tokens are made (all prompts' first tokens, then one decode step at a time), for
 *  streaming output. The outputs are also written as dt_engine_generate writes them. */
DT_API dt_status dt_engine_generate_stream(dt_engine* engine, const int32_t* prompt_tokens,
                                           const int64_t* prompt_lengths, int32_t n_prompts,
                                           const dt_options* options, dt_token_callback on_token,
                                           void* user, int32_t* out_tokens,
                                           int64_t out_capacity_per_prompt, int64_t* out_lengths);

/** A token callback that can stop the generation: return 0 to go on, anything else to
 *  stop. Called on the thread that called generate, as dt_token_callback is. */
typedef int32_t (*dt_token_callback_v2)(void* user, int32_t prompt_index, int32_t token);

/** dt_engine_generate_stream with a callback that can stop it: once on_token returns
 *  nonzero it is not called again, the generation ends within one decode step (over a
 *  pipeline, pp > 1: once the units in flight drain), and the call returns
 *  DT_ERR_CANCELLED without writing the outputs (the tokens the callback saw are the answer
 *  so far). An attached dt_cancel (dt_engine_set_cancel) stops it too. */
DT_API dt_status dt_engine_generate_stream_v2(dt_engine* engine, const int32_t* prompt_tokens,
                                              const int64_t* prompt_lengths, int32_t n_prompts,
                                              const dt_options* options, dt_token_callback_v2 on_token,
                                              void* user, int32_t* out_tokens,
                                              int64_t out_capacity_per_prompt, int64_t* out_lengths);

/* ------------------------------------------------------------------------------------ */
/* Cancellation                                                                         */
/* ------------------------------------------------------------------------------------ */

/** A flag that any thread may raise to stop the engine calls watching it. Cheap: make one
 *  per call that may be cancelled (a Go context, a stream that may be left early). */
typedef struct dt_cancel dt_cancel;

/** Creates a flag, not raised. Caller owns *out; release with dt_cancel_destroy (an engine
 *  it is attached to keeps its own reference). Thread-safe. */
DT_API dt_status dt_cancel_create(dt_cancel** out);

/** Releases the caller's reference. NULL: no-op. Thread-safe, but not concurrently with a
 *  dt_cancel_request on the same handle. */
DT_API void dt_cancel_destroy(dt_cancel* cancel);

/** Raises the flag. Idempotent; never blocks (one atomic store). Thread-safe: the call to
 *  make from another thread, a signal handler or a deadline timer. */
DT_API dt_status dt_cancel_request(dt_cancel* cancel);

/** Lowers the flag again (for reuse). Thread-safe. */
DT_API dt_status dt_cancel_reset(dt_cancel* cancel);

/** *out = 1 when the flag is raised, else 0. Thread-safe. */
DT_API dt_status dt_cancel_is_requested(const dt_cancel* cancel, int32_t* out);

/** Attaches `cancel` (NULL: detaches) to the engine: while it is raised, the engine's calls
 *  (dt_engine_train_step, dt_engine_eval, dt_engine_generate and its stream forms) end
 *  with DT_ERR_CANCELLED, and the engine, its module, optimizer and mesh stay usable. A
 *  call already running stops at its next check: on one rank, before every layer of a
 *  train step or an evaluation and before the update; on a mesh of several ranks, where
 *  the step's gradients are complete (the ranks agree to stop with one small all-reduce,
 *  so that none updates alone; under mpirun attach a flag in every process or in none);
 *  generation before each decode step (over a pipeline the last stage decides and the
 *  units in flight drain). A cancelled train step
 *  changes nothing: no update, the step count and optimizer state as before, the gradients
 *  cleared. Raised before a call starts, it fails that call at once. The engine keeps a
 *  reference until detached or destroyed. Same thread rules as the engine's other calls
 *  (dt_cancel_request is the call for other threads). */
DT_API dt_status dt_engine_set_cancel(dt_engine* engine, dt_cancel* cancel);

/** The last successful generate's statistics as JSON ({"new_tokens":..,"tokens_per_s":..,
 *  "time_to_first_token_s":..,"inter_token_latency_s":..}; "" before any), written as
 *  dt_memory_report_json writes. */
DT_API dt_status dt_engine_last_generate_stats_json(dt_engine* engine, char* buf, size_t capacity,
                                                    size_t* needed);

/* ------------------------------------------------------------------------------------ */
/* Serving: continuous batching over a paged KV cache                                    */
/* ------------------------------------------------------------------------------------ */

/** A serving engine on its own thread (vLLM's design): requests arrive and leave at any
 *  time; each step mixes the decode tokens of running requests with prefill chunks of new
 *  ones over a KV cache of fixed-size blocks (shared between requests with a common prompt
 *  prefix, preempted and recomputed when the blocks run out). A request's tokens are those
 *  dt_engine_generate gives its prompt alone with the same options, whatever else runs. */
typedef struct dt_server dt_server;

/** Request states (append-only), as dt_server_poll reports them. */
enum {
  DT_REQUEST_WAITING = 0,   /* queued, not yet admitted */
  DT_REQUEST_RUNNING = 1,   /* admitted: prefilling or decoding */
  DT_REQUEST_PREEMPTED = 2, /* sent back to the queue when the KV blocks ran out */
  DT_REQUEST_FINISHED = 3,  /* ended: a stop token or max_tokens */
  DT_REQUEST_ABORTED = 4,   /* ended: cancelled, or the server stopped or failed */
  DT_REQUEST_REJECTED = 5   /* ended: it can never run (longer than the context or the cache) */
};

/** Creates a server over a GPT `module`'s current weights (copied into the ranks' parts;
 *  do not train the module while the server lives). mesh: NULL (one rank) or a mesh whose
 *  dp axis is the number of replicas (each request goes to the one with the fewest
 *  outstanding tokens), tp splits heads and the KV cache, pp places blocks (the step's
 *  requests flow through the stages in groups). On an "mpi" mesh every process calls this:
 *  world rank 0's server takes the requests and sends each step's plan to the others, whose
 *  servers run their parts until rank 0's is destroyed (there dt_server_drain waits for
 *  that, and dt_server_submit is DT_ERR_UNAVAILABLE). options: NULL or keys "block_size"
 *  (1..1024 positions, default 16), "kv_blocks" (blocks per replica; default 0: as many as
 *  "kv_cache_bytes" holds), "kv_cache_bytes" (per rank, default 64 MiB), "max_num_seqs"
 *  (1..4096, default 16: requests running at once), "max_batched_tokens" (1..2^20, default
 *  256: tokens per step, the prefill chunk bound), "prefix_caching" (bool, default 1),
 *  "pp_blocks" (as dt_engine_create). The pool is counted in the memory ledger as
 *  DT_MEM_KV_CACHE. Starts the server's thread. Caller owns *out; release with
 *  dt_server_destroy. */
DT_API dt_status dt_server_create(dt_mesh* mesh, dt_module* module, const dt_options* options, dt_server** out);

/** Ends every request still in flight (each callback gets its end, state ABORTED), stops
 *  the thread and releases the server. NULL: no-op. */
DT_API void dt_server_destroy(dt_server* server);

/** Receives a request's events on the server's thread: each new token (done = 0), then
 *  the end (done = 1; token is the last token, or -1 when it ended without one) with
 *  `state` a DT_REQUEST_* value and `reason` "stop", "length", "abort", or why it was
 *  rejected or aborted (valid during the call). Must not block: every request waits. */
typedef void (*dt_request_callback)(void* user, int64_t request_id, int32_t token, int32_t done, int32_t state,
                                    const char* reason);

/** Submits a request: prompt_len (>= 1) token ids in [0, vocab_size). options: NULL or
 *  keys "max_tokens" (>= 1, default 16), "temperature" (>= 0, default 0: greedy), "top_k"
 *  (>= 0), "top_p" ((0, 1]), "seed" (int), "stop_tokens" (string of ids, "3,7"; the output
 *  ends after one of them), and the OpenAI completions API's, applied in this order to the
 *  logits before temperature, top_k and top_p (greedy takes the argmax of the result):
 *  "logit_bias" (string "id:bias,id:bias", such as "50256:-100,11:2.5"; ids in
 *  [0, vocab_size), each once; biases in [-100, 100]; at most 300 entries: added to those
 *  ids' logits), "repetition_penalty" (double in (0, 2], default 1: off; each distinct token
 *  of the prompt or the output so far has its logit divided by it if positive, multiplied
 *  if not), "presence_penalty" and "frequency_penalty" (doubles in [-2, 2], default 0:
 *  logit -= presence * (count > 0) + frequency * count, count = the token's occurrences in
 *  the output so far, the prompt not counted), "logprobs" (int in [0, 20], default -1: none;
 *  k >= 0 records each output token's log-probability and the k most likely tokens'; see
 *  dt_server_poll_logprobs). The draw stays keyed by (seed, index of the token in the
 *  output), so a request's tokens do not depend on what else runs.
 *  on_event: NULL to collect the tokens with dt_server_poll or dt_server_poll_logprobs.
 *  *out_id gets the request's id. A request that can never run is accepted and then
 *  rejected (its end event says why); bad arguments fail here (DT_ERR_INVALID_ARGUMENT);
 *  DT_ERR_UNAVAILABLE while the server drains or after it failed. Thread-safe. */
DT_API dt_status dt_server_submit(dt_server* server, const int32_t* prompt, int64_t prompt_len,
                                  const dt_options* options, dt_request_callback on_event, void* user,
                                  int64_t* out_id);

/** Waits up to timeout_ms (>= 0) for news of a request submitted without a callback, then
 *  takes up to `capacity` of its new tokens into `tokens` (*n_out of them), and its state
 *  (DT_REQUEST_*) into *state_out. *done_out = 1 once it ended and every token was taken:
 *  the id is then forgotten (later polls: DT_ERR_NOT_FOUND). Thread-safe. */
DT_API dt_status dt_server_poll(dt_server* server, int64_t request_id, int32_t* tokens, int64_t capacity,
                                int64_t* n_out, int32_t* state_out, int32_t* done_out, int32_t timeout_ms);

/** Aborts a request at once: its KV blocks are freed and its end event says "abort".
 *  DT_ERR_NOT_FOUND if the id is unknown or already ended. Thread-safe. */
DT_API dt_status dt_server_cancel(dt_server* server, int64_t request_id);

/** Stops accepting requests and waits up to timeout_ms for those in flight to end
 *  (DT_ERR_TIMEOUT if some are still running then). Thread-safe. */
DT_API dt_status dt_server_drain(dt_server* server, int32_t timeout_ms);

/** Statistics as JSON ({"requests":{"waiting":..,"running":..,"finished":..,..},
 *  "tokens":{..},"tokens_per_s":..,"ttft_s":{"p50":..,"p90":..,"p99":..},"itl_s":{..},
 *  "kv_cache":{"used_blocks":..,"cached_blocks":..,"free_blocks":..,..},"preemptions":..}),
 *  written as dt_memory_report_json writes. Thread-safe. */
DT_API dt_status dt_server_stats_json(dt_server* server, char* buf, size_t capacity, size_t* needed);

/** The same figures in Prometheus text format (what GET /metrics serves). Thread-safe. */
DT_API dt_status dt_server_metrics_text(dt_server* server, char* buf, size_t capacity, size_t* needed);

/** The model's context length and vocabulary size (for a front end's checks). */
DT_API dt_status dt_server_model_info(dt_server* server, int64_t* context, int64_t* vocab_size);

/** dt_server_poll for a request submitted with "logprobs" = k >= 0, with each token's
 *  log-probabilities beside it. A log-probability is log-softmax of the model's own logits
 *  for that position (before logit_bias, the penalties, temperature, top_k and top_p; what
 *  the model gives, whatever was drawn). For token i of the *n_out taken: tokens[i],
 *  logprobs[i] (its log-probability; NULL: not wanted), and row i of top_ids /
 *  top_logprobs, entries [i * top_stride, (i + 1) * top_stride): the min(k, top_stride)
 *  most likely tokens by descending log-probability (lower id first on ties; the drawn
 *  token may or may not be among them), the rest of the row -1 / -INFINITY. top_stride in
 *  [0, 20]; top_ids and top_logprobs hold capacity x top_stride entries (NULL allowed when
 *  top_stride is 0). DT_ERR_INVALID_ARGUMENT, with nothing taken, for a request submitted
 *  without "logprobs". dt_server_poll also reads such a request (dropping its
 *  log-probabilities); the two may be mixed. Thread-safe. */
DT_API dt_status dt_server_poll_logprobs(dt_server* server, int64_t request_id, int32_t* tokens, float* logprobs,
                                         int32_t* top_ids, float* top_logprobs, int32_t top_stride,
                                         int64_t capacity, int64_t* n_out, int32_t* state_out, int32_t* done_out,
                                         int32_t timeout_ms);

/** Called from inside a dt_request_callback of this server (on its thread), for the event
 *  being delivered: *logprob gets its token's log-probability and top_ids / top_logprobs
 *  up to `capacity` of the most likely tokens' (as dt_server_poll_logprobs gives them;
 *  *n_out of them; NULL allowed when capacity is 0). DT_ERR_NOT_FOUND when the event has
 *  none (an end without a token, or a request submitted without "logprobs");
 *  DT_ERR_INVALID_ARGUMENT outside a callback. Reads the calling thread's current event
 *  only, so it is safe beside any other call. */
DT_API dt_status dt_server_event_logprobs(dt_server* server, float* logprob, int32_t* top_ids, float* top_logprobs,
                                          int32_t capacity, int32_t* n_out);

/* ------------------------------------------------------------------------------------ */
/* Checkpoints                                                                          */
/* ------------------------------------------------------------------------------------ */

/** Creates the GPT that the checkpoint at `path_stem` (as dt_engine_save wrote it) was saved
 *  from: the same config, freshly initialized; load its weights with dt_engine_load.
 *  DT_ERR_IO for a missing or corrupt index or a config it lacks. dt_engine_load refuses a
 *  checkpoint of another config (DT_ERR_INVALID_ARGUMENT naming the field that differs).
 *  Caller owns *out; release with dt_module_destroy. Thread-safe. */
DT_API dt_status dt_module_create_from_checkpoint(const char* path_stem, dt_module** out);

/** The checkpoint's metadata as JSON ({"step":..,"config":{<dt_module_create_gpt keys>},
 *  "tensors":<count>,..}), written as dt_memory_report_json writes, plus how it is stored:
 *  "format_version" (1 or 2), "generation", "chunks" (count), "bytes" (of the data files),
 *  "files": [{"name", "bytes", "chunks", "tensors"}] (one per writing rank of a sharded
 *  save), and "layout" ({"world", "dp", "tp", "pp", "ep", "cp", ...}) when a mesh saved
 *  it. Thread-safe. */
DT_API dt_status dt_checkpoint_info_json(const char* path_stem, char* buf, size_t capacity,
                                         size_t* needed);

/** Rewrites the checkpoint at `src_stem` (any layout's) as one writer's at `dst_stem`:
 *  every tensor whole in one data file, the metadata kept (its "layout" dropped), checksums
 *  recomputed. It holds the whole state in this process's memory while it works (every
 *  other save and load reads and writes shards). `dst_stem` may not be `src_stem`.
 *  DT_ERR_IO for a missing or corrupt source (checked before anything is written).
 *  Thread-safe for distinct destinations. */
DT_API dt_status dt_checkpoint_consolidate(const char* src_stem, const char* dst_stem);

/* ------------------------------------------------------------------------------------ */
/* Hugging Face models                                                                  */
/* ------------------------------------------------------------------------------------ */

/** Creates a GPT from a Hugging Face model directory `dir`: config.json (architectures
 *  GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM),
 *  generation_config.json if present, and the weights in model.safetensors or in the shards
 *  that model.safetensors.index.json names (f32, bf16 or f16; read tensor by tensor and converted
 *  once into the module's layout and precision). options (may be NULL):
 *   "precision"  "f32" (default) | "bf16" | "f16" | "stored" (the files' dtype).
 *   "context"    int: the longest sequence, 1 to the model's max_position_embeddings (the
 *                default; a Mistral's is capped at its sliding window; GPT-2's learned
 *                positions take no other).
 *   "random_init" bool (default false): the config's shape with fresh weights (seeded by
 *                "random_init_seed", int), the weight files not read and not required.
 *  The module lives on the CPU.
 *  The module then trains, generates, serves and checkpoints like any GPT, under any layout.
 *  An unsupported architecture or setting is DT_ERR_INVALID_ARGUMENT naming it and what is
 *  accepted; a missing, extra or mis-shaped tensor, a shard outside the directory or a
 *  malformed file is DT_ERR_IO naming the file and the tensor. Nothing is half-loaded.
 *  Caller owns *out; release with dt_module_destroy. Thread-safe. */
DT_API dt_status dt_module_create_from_hf(const char* dir, const dt_options* options, dt_module** out);

/** Writes a GPT module as a Hugging Face directory `dir` (created if missing; each file
 *  replaced atomically) that transformers loads: config.json, generation_config.json,
 *  model.safetensors (or shards and an index past "max_shard_bytes"). options (may be NULL):
 *   "precision"       "f32" | "bf16" | "f16" of the stored weights (default: the module's).
 *   "architecture"    one of those above (default: the one the module's config is an
 *                     instance of; a module of neither GPT-2 nor Llama style is refused).
 *   "tokenizer_from"  a directory whose tokenizer files (tokenizer.json,
 *                     tokenizer_config.json, ...) are copied over.
 *   "bos_token_id", "eos_token_id"  int: written into both configs (default: none);
 *   "eos_token_ids"   string of ids ("128001,128009"): several end-of-sequence ids.
 *   "max_shard_bytes" int >= 1 (default 4 GiB).
 *  After training through an engine, call dt_engine_save first or read the weights from
 *  dt_engine_save_hf, which gathers them. Not thread-safe against steps on the module. */
DT_API dt_status dt_module_save_hf(dt_module* module, const char* dir, const dt_options* options);

/** What dt_module_save_hf writes, from an engine's current weights: under tp, pp, dp or
 *  ZeRO they are gathered first (collective: under mpirun every process calls it, rank 0
 *  writes). Same options. */
DT_API dt_status dt_engine_save_hf(dt_engine* engine, const char* dir, const dt_options* options);

/** Describes a Hugging Face model directory without loading its weights, as JSON:
 *  {"architecture":..,"config":{<dt_module_create_gpt keys>},"parameters":..,
 *  "stored_dtype":"bf16","weight_bytes":..,"files":[..],"bos_token_id":..,
 *  "eos_token_ids":[..],"max_position_embeddings":..}. Written as dt_memory_report_json
 *  writes. A directory without weight files is described too ("files" empty). Errors as
 *  dt_module_create_from_hf. Thread-safe. */
DT_API dt_status dt_hf_inspect_json(const char* dir, char* buf, size_t capacity, size_t* needed);

/* ------------------------------------------------------------------------------------ */
/* Tokenizers and chat templates                                                        */
/* ------------------------------------------------------------------------------------ */

/** A Hugging Face tokenizer (tokenizer.json: byte-level BPE with the model's split regex,
 *  SentencePiece-style BPE with byte fallback, their normalizers, added and special tokens
 *  and decoders) with the model's chat template (tokenizer_config.json) and end-of-sequence
 *  ids (generation_config.json). Immutable once made: distinct threads may use one. */
typedef struct dt_tokenizer dt_tokenizer;

/** Loads a tokenizer from `path`: a model directory (its tokenizer.json, and if present
 *  tokenizer_config.json and generation_config.json) or a tokenizer.json file. options
 *  (may be NULL): "chat_template" a built-in family to use instead of the file's ("chatml",
 *  "llama3", "llama2", "mistral", "zephyr"). Anything in tokenizer.json that libdtrain does
 *  not implement exactly is refused by name (DT_ERR_INVALID_ARGUMENT); a malformed or
 *  hostile file is DT_ERR_IO. Caller owns *out; release with dt_tokenizer_destroy. */
DT_API dt_status dt_tokenizer_create(const char* path, const dt_options* options, dt_tokenizer** out);
DT_API void dt_tokenizer_destroy(dt_tokenizer* tokenizer);

/** Token ids of `len` bytes of `text` (UTF-8; invalid sequences read as U+FFFD, as Python's
 *  errors="replace"). add_special_tokens nonzero: the post-processor's tokens too (Llama's
 *  BOS). Writes up to `capacity` ids into `ids` (may be NULL when capacity is 0) and the
 *  full count into *n_ids: call with capacity 0 to size the buffer. Thread-safe. */
DT_API dt_status dt_tokenizer_encode(dt_tokenizer* tokenizer, const char* text, size_t len,
                                     int32_t add_special_tokens, int32_t* ids, size_t capacity,
                                     size_t* n_ids);

/** The text of `n` ids (skip_special_tokens nonzero: special tokens left out), written as
 *  dt_memory_report_json writes (NUL-terminated; *needed includes the NUL). An id outside
 *  the vocabulary is DT_ERR_INVALID_ARGUMENT. Thread-safe. */
DT_API dt_status dt_tokenizer_decode(dt_tokenizer* tokenizer, const int32_t* ids, size_t n,
                                     int32_t skip_special_tokens, char* buf, size_t capacity,
                                     size_t* needed);

/** The vocabulary size (largest id + 1). Thread-safe. */
DT_API dt_status dt_tokenizer_vocab_size(dt_tokenizer* tokenizer, int64_t* out);

/** The id of a token's text (e.g. "<|im_end|>"); DT_ERR_NOT_FOUND if it has none. */
DT_API dt_status dt_tokenizer_token_to_id(dt_tokenizer* tokenizer, const char* token, int32_t* out);

/** The special tokens as JSON: {"bos_token":..,"eos_token":..,"bos_token_id":..,
 *  "eos_token_ids":[..],"special":[{"id":..,"content":..},..],"chat_template":bool}.
 *  eos_token_ids are what generation stops at: generation_config.json's, else the
 *  tokenizer_config's eos token. Written as dt_memory_report_json writes. */
DT_API dt_status dt_tokenizer_info_json(dt_tokenizer* tokenizer, char* buf, size_t capacity,
                                        size_t* needed);

/** Renders a conversation with the tokenizer's chat template, byte-identical to
 *  transformers' apply_chat_template(messages, tokenize=False, add_generation_prompt=...).
 *  messages_json: [{"role":"system"|"user"|"assistant","content":"..."},..]. A template
 *  error (raise_exception in it, such as roles that do not alternate) is
 *  DT_ERR_INVALID_ARGUMENT carrying its message; no template is DT_ERR_NOT_FOUND naming the
 *  "chat_template" option. Written as dt_memory_report_json writes. Thread-safe. */
DT_API dt_status dt_tokenizer_apply_chat_template(dt_tokenizer* tokenizer, const char* messages_json,
                                                  int32_t add_generation_prompt, char* buf,
                                                  size_t capacity, size_t* needed);

/** Streaming decode: ids in one at a time, text out only when final (never half a UTF-8
 *  character; a SentencePiece leading space handled as a whole decode handles it), so the
 *  pieces concatenate to dt_tokenizer_decode of all ids. One thread at a time. */
typedef struct dt_detokenizer dt_detokenizer;
DT_API dt_status dt_detokenizer_create(dt_tokenizer* tokenizer, int32_t skip_special_tokens,
                                       dt_detokenizer** out);
DT_API void dt_detokenizer_destroy(dt_detokenizer* detokenizer);
/** Adds one id; its text, when final, waits for dt_detokenizer_text. */
DT_API dt_status dt_detokenizer_push(dt_detokenizer* detokenizer, int32_t id);
/** Ends the stream: what is held back is released (an incomplete UTF-8 tail as U+FFFD). */
DT_API dt_status dt_detokenizer_finish(dt_detokenizer* detokenizer);
/** The text made final since the last successful call, written as dt_memory_report_json
 *  writes; it is taken (cleared) only when it fitted in `capacity`. */
DT_API dt_status dt_detokenizer_text(dt_detokenizer* detokenizer, char* buf, size_t capacity,
                                     size_t* needed);

/* ------------------------------------------------------------------------------------ */
/* Datasets and loaders                                                                 */
/* ------------------------------------------------------------------------------------ */

/** Fixed-length examples: example i is `context` input tokens and the `context` targets
 *  (the inputs shifted by one; -1 where nothing is to be learned). Immutable once made:
 *  distinct threads may read one dataset. */
typedef struct dt_dataset dt_dataset;

/** Creates a dataset.
 *  kind "text":     any file, one token per byte. options: "path" (string, required),
 *                   "context" (int >= 1, required).
 *  kind "tokens":   little-endian token ids. options: "path", "context" as for "text",
 *                   "width" (2: u16, the default; 4: u32), "vocab_size" (int: every token
 *                   must be below it; 0, the default: no check).
 *  kind "text" with "tokenizer" (a model directory or tokenizer.json): the file's text
 *                   through that tokenizer instead of one token per byte.
 *  kind "jsonl":    JSON lines, tokenized with the required "tokenizer" option: lines of
 *                   {"text": ...} (each followed by the model's end-of-sequence id, the
 *                   stream cut into examples), or of {"messages": [{"role","content"},..]}
 *                   (one conversation per example, rendered with the chat template, cut or
 *                   padded to context; targets only on the assistant turns, else -1).
 *                   "chat_template": a built-in family instead of the model's. "path" and
 *                   "context" as for "text". A malformed line is DT_ERR_IO naming it.
 *  kind "addition": "a+b=c" problems such as "042+917=0959\n" (operands zero-padded, only
 *                   the sum's digits and the newline are targets). options: "digits" (1 to
 *                   18, default 3), "size" (examples, 1 to 2^32 = 4294967296, default
 *                   100000), "seed" (int),
 *                   "split" ("all", the default; "train": never a held-out problem;
 *                   "test": only held-out problems, a fixed tenth of all (a, b) pairs).
 *  A missing, unreadable or too-short file is an error naming it (DT_ERR_IO or
 *  DT_ERR_INVALID_ARGUMENT). Caller owns *out; release with dt_dataset_destroy. */
DT_API dt_status dt_dataset_create(const char* kind, const dt_options* options, dt_dataset** out);

/** Releases the handle; loaders made from it keep the data alive. NULL is a no-op. */
DT_API void dt_dataset_destroy(dt_dataset* dataset);

/** Number of examples. */
DT_API dt_status dt_dataset_size(const dt_dataset* dataset, int64_t* out);

/** Tokens per example (T of the [B, T] batches). */
DT_API dt_status dt_dataset_context(const dt_dataset* dataset, int64_t* out);

/** Example `index` (0 to size - 1): writes context tokens into each of inputs and targets. */
DT_API dt_status dt_dataset_example(const dt_dataset* dataset, int64_t index, int32_t* inputs,
                                    int32_t* targets);

/** Batches of a dataset in a seeded order: every epoch is a permutation of the examples
 *  fixed by (seed, epoch); a last partial batch is dropped. One host thread at a time. */
typedef struct dt_loader dt_loader;

/** Creates a loader. options: "batch" (int, required: 1 to the dataset's size), "seed"
 *  (int, default 0), "shuffle" (bool, default 1; 0: examples in order). An epoch's order
 *  takes 8 bytes per example: DT_ERR_OUT_OF_MEMORY when that exceeds the machine's physical
 *  memory. Keeps the dataset alive. Caller owns *out; release with dt_loader_destroy. */
DT_API dt_status dt_loader_create(dt_dataset* dataset, const dt_options* options, dt_loader** out);

/** Releases the handle. NULL is a no-op. */
DT_API void dt_loader_destroy(dt_loader* loader);

/** Writes the next batch into inputs and targets: i32 CPU tensors [batch, context] that the
 *  caller made (dt_tensor_create), ready for dt_engine_train_step; then advances. */
DT_API dt_status dt_loader_next(dt_loader* loader, dt_tensor* inputs, dt_tensor* targets);

/** Full batches per epoch. */
DT_API dt_status dt_loader_batches_per_epoch(dt_loader* loader, int64_t* out);

/** Where the next batch comes from: its epoch and its index within the epoch. A resumed run
 *  seeks back to the position it saved (or to step / batches_per_epoch, step % it). */
DT_API dt_status dt_loader_position(dt_loader* loader, int64_t* epoch, int64_t* batch_index);

/** Moves to batch `batch_index` (0 to batches_per_epoch - 1) of `epoch` (0 to 2^62). */
DT_API dt_status dt_loader_seek(dt_loader* loader, int64_t epoch, int64_t batch_index);

/* ------------------------------------------------------------------------------------ */
/* Host-driven modules: a network of your own, and your own training loop              */
/* ------------------------------------------------------------------------------------ */

/** Creates a sequential container: layers run in order, as in PyTorch's nn.Sequential.
 *  config keys: "layers" (required string, comma-separated: "linear:IN:OUT" (with bias),
 *  "linear:IN:OUT:nobias", "gelu", "silu", "layernorm:DIM", "rmsnorm:DIM"; the widths must
 *  chain, e.g. "linear:4:32,gelu,layernorm:32,linear:32:1"), "seed" (int: weights are a
 *  function of (seed, parameter name)), "init_std" (double >= 0, default 0.02: the normal
 *  init of linear weights). Parameters are named by position: "0.weight", "0.bias", ...
 *  Drive it with dt_module_forward/_backward, dt_loss and dt_optimizer_step.
 *  Caller owns *out; release with dt_module_destroy. Thread-safe. */
DT_API dt_status dt_module_create_sequential(const dt_options* config, dt_module** out);

/** Forward of a sequential or MLP module (a GPT trains through the engine:
 *  DT_ERR_INVALID_ARGUMENT). x: f32 [N, in] on the CPU. *y receives a new tensor [N, out]
 *  (caller owns; release with dt_tensor_destroy). The module keeps what backward needs for
 *  this one batch; the next forward replaces it. One host thread per module. */
DT_API dt_status dt_module_forward(dt_module* module, const dt_tensor* x, dt_tensor** y);

/** Backward of the last dt_module_forward, from dy (f32, the shape of its output):
 *  every parameter's gradient ACCUMULATES its gradient (+=; see dt_module_zero_grad).
 *  dx: NULL (not computed), or *dx receives a new tensor [N, in], the input's gradient. */
DT_API dt_status dt_module_backward(dt_module* module, const dt_tensor* dy, dt_tensor** dx);

/** Sets every parameter's gradient to zero (do it between optimizer steps). */
DT_API dt_status dt_module_zero_grad(dt_module* module);

/** A loss and its gradient. kind "mse": mean of (pred - target)^2, pred and target f32 of
 *  one shape. kind "cross_entropy": pred f32 logits [N, V], target i32 [N] (class ids, or
 *  -1: no loss there), the mean over the rows that count. *loss receives the mean; dpred:
 *  NULL, or *dpred receives a new tensor d loss / d pred (caller owns). */
DT_API dt_status dt_loss(const char* kind, const dt_tensor* pred, const dt_tensor* target,
                         double* loss, dt_tensor** dpred);

/** One update of every parameter of the optimizer's module from its accumulated gradients
 *  (the engine does this itself; this is for host-driven loops). */
DT_API dt_status dt_optimizer_step(dt_optimizer* optimizer);

/** Sets the learning rate of the following steps (lr >= 0). */
DT_API dt_status dt_optimizer_set_lr(dt_optimizer* optimizer, double lr);

/* ------------------------------------------------------------------------------------ */
/* Trace: the timeline                                                                  */
/* ------------------------------------------------------------------------------------ */

/** Starts (on = 1, clearing what was recorded) or stops (on = 0) recording the timeline:
 *  per rank, a compute track (forward, backward of each block, the optimizer step, and the
 *  time spent waiting for gradient all-reduces) and a comm track (each bucket's all-reduce,
 *  from its start during backward to its end). Off by default. Thread-safe. */
DT_API dt_status dt_trace_enable(int32_t on);

/** Writes what was recorded as Chrome trace-event JSON to `path` (open it in Perfetto,
 *  https://ui.perfetto.dev, or chrome://tracing). DT_ERR_IO when the file cannot be
 *  written. Thread-safe. */
DT_API dt_status dt_trace_write(const char* path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DTRAIN_DTRAIN_H */
