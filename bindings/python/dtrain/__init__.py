"""dtrain: distributed training and inference with libdtrain, from Python.

    import dtrain
    with dtrain.Mesh("local", 2) as mesh, dtrain.GPT(preset="gpt-tiny") as model:
        engine = dtrain.Engine(mesh, model, dtrain.Optimizer(model, "adamw", lr=3e-3))
        for inputs, targets in loader:               # a dtrain.Loader: one epoch
            engine.train_step(inputs, targets, cancel=token)  # token.cancel() from any thread
        for tok in engine.stream(b"123+456=", max_new_tokens=8):
            ...                                      # break: the generation is cancelled
        arr = tensor.numpy()                         # zero-copy both ways, and DLPack:
        t = dtrain.from_dlpack(torch_tensor)         # torch.from_dlpack(t) too
        with dtrain.Server(model, block_size=16) as server:  # serving: continuous batching
            tokens = list(server.submit([1, 2, 3], max_tokens=8))

    with dtrain.Model.from_hf("Qwen2-0.5B") as model, dtrain.Tokenizer("Qwen2-0.5B") as tok:
        ids = tok.encode(tok.apply_chat_template([{"role": "user", "content": "Hi"}]))
        ...                                          # Model.save_hf / Engine.save_hf write one

Every handle has close() and works as a context manager; a failed call raises the
DtrainError subclass of its status (InvalidArgumentError is also a ValueError, ...;
CancelledError for a cancelled call).
"""
import contextlib
import json
from typing import Any, Dict, Mapping, Optional, Tuple

from . import native
from ._json import read_json
from .errors import *  # noqa: F401,F403
from .tensor import BF16, F16, F32, I32, I64, Tensor, from_dlpack  # noqa: F401
from ._handle import Options, options_ptr  # noqa: F401
from .cancel import CancelToken  # noqa: F401
from .mesh import Mesh  # noqa: F401
from .model import GPT, MLP, Model, Optimizer, Sequential, gpt_param_count, loss  # noqa: F401
from .engine import Engine  # noqa: F401
from .data import Dataset, Loader  # noqa: F401
from .server import Request, Server  # noqa: F401
from .hf import Detokenizer, Tokenizer, hf_inspect  # noqa: F401

__version__: str = native.dt_version()
from_numpy = Tensor.from_numpy


def configure(**settings: object) -> None:
    """Process-wide settings: threads, memory_limit_bytes, pool_cache_bytes."""
    opts = Options(settings)
    try:
        native.dt_configure(opts._h)
    finally:
        opts.close()


def shutdown() -> None:
    """Finalizes MPI if libdtrain initialized it. libdtrain also does this at exit; call it
    yourself only where the process ends without running atexit handlers."""
    native.dt_shutdown()


def memory_stats(device: str = "cpu", tag: str = "all", rank: Optional[int] = None) -> Tuple[int, int]:
    """(current, peak) bytes held on `device` under `tag`, for the process or one rank."""
    tags = {native.dt_mem_tag_name(i): i for i in range(8)}
    if tag not in tags:
        raise ValueError("tag %r: accepted: %s" % (tag, ", ".join(tags)))
    if rank is None:
        return tuple(native.dt_memory_stats(device, tags[tag]))  # type: ignore[return-value]
    return tuple(native.dt_memory_rank_stats(device, rank, tags[tag]))  # type: ignore[return-value]


def device_count(kind: str = "cuda") -> int:
    return native.dt_device_count(kind)


def runtime_info() -> Dict[str, Any]:
    """What this process runs on: {"version", "cpu": {"cpu", "isa_level", "isa", "blas",
    "gemm": {"f32", "bf16", "bf16_native", "bf16_reason", ...}}, "cuda_devices"} (the GEMM
    path each dtype takes, chosen at run time from the CPU; dtrain info prints the same)."""
    return read_json(native.dt_runtime_info_json)


def plan(config: Optional[Mapping[str, Any]] = None, plan: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The layout planner (dt_plan_json), without building the model: config is a GPT's keys
    (those of dtrain.GPT), plan the layout's ("dp", "tp", "pp", "micro_batch", "seq_len",
    "accumulation", "sequence_parallel", "pp_schedule", "virtual_stages", ...). With
    "cluster" (a built-in name such as "h100-node" or "h100-node:16", or a cluster's JSON:
    text, or the dict calibrate_cluster returns) the result gains "cost" (per rank "memory"
    and "peak_bytes", "step_s", "tokens_per_s", "mfu", "time", "fits"), read with "zero",
    "recompute" and "in_process"; "search": True instead returns {"search": ...}, the "top"
    fastest layouts of the cluster's devices for "global_batch" sequences. An unknown
    cluster name raises NotFoundError naming the built-in ones."""
    values = dict(plan or {})
    if isinstance(values.get("cluster"), Mapping):
        values["cluster"] = json.dumps(values["cluster"])
    with contextlib.ExitStack() as stack:
        cfg, opts = options_ptr(config, stack), options_ptr(values, stack)
        return read_json(lambda buf: native.dt_plan_json(cfg, opts, buf))


def calibrate_cluster() -> Dict[str, Any]:
    """This machine measured as a cluster for plan()'s "cluster" (dt_cluster_calibrate_json):
    GEMM, attention and elementwise rates on one core and on all, and the local backend's
    all-reduce latency and bandwidth. Takes a few seconds and times the cores: run it with
    nothing else heavy going on."""
    # A first buffer that holds a cluster's JSON: the cores are timed once, not twice.
    return read_json(lambda buf: native.dt_cluster_calibrate_json(None, buf), capacity=65536)


def median_cluster(clusters) -> Dict[str, Any]:
    """The field-by-field median of several calibrations of one machine
    (dt_cluster_median_json): clusters is a list of cluster dicts (calibrate_cluster's) or their
    JSON text as one array; each rate, fitted figure and link figure is their median. On a
    shared host single calibrations' fitted figures differ by 10-20%."""
    text = clusters if isinstance(clusters, str) else json.dumps(list(clusters))
    return read_json(lambda buf: native.dt_cluster_median_json(text, buf))
