"""dtrain.Model (a GPT, an MLP or a sequential network) and dtrain.Optimizer."""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

M = TypeVar("M", bound="Model")
PathLike = Union[str, "os.PathLike[str]"]

from . import native
from ._handle import Handle, handle_of, options_ptr
from .tensor import Tensor


def hf_save_options(precision: Optional[str], architecture: Optional[str], tokenizer_from: Optional[PathLike],
                    bos_token_id: Optional[int], eos_token_id: Optional[int],
                    eos_token_ids: Optional[Union[str, Sequence[int]]], max_shard_bytes: Optional[int]) -> Dict[str, Any]:
    """The options of dt_module_save_hf / dt_engine_save_hf, leaving out those not given."""
    if eos_token_ids is not None and not isinstance(eos_token_ids, str):
        eos_token_ids = ",".join(str(int(t)) for t in eos_token_ids)
    values = {"precision": precision, "architecture": architecture,
              "tokenizer_from": None if tokenizer_from is None else os.fspath(tokenizer_from),
              "bos_token_id": bos_token_id, "eos_token_id": eos_token_id, "eos_token_ids": eos_token_ids,
              "max_shard_bytes": max_shard_bytes}
    return {k: v for k, v in values.items() if v is not None}


class Model(Handle):
    """A model with named parameters. Make one with dtrain.GPT, dtrain.MLP,
    dtrain.Sequential or Model.from_checkpoint."""

    _destroy = staticmethod(native.dt_module_destroy)

    @classmethod
    def _make(cls: Type[M], create: Callable[[Any], Any], config: dict) -> M:
        with contextlib.ExitStack() as stack:
            return cls(create(options_ptr(config, stack)))

    @classmethod
    def from_checkpoint(cls: Type[M], path_stem: str) -> M:
        """The GPT a checkpoint was saved from (fresh weights: load them with Engine.load)."""
        return cls(native.dt_module_create_from_checkpoint(path_stem))

    @classmethod
    def from_hf(cls: Type[M], dir: PathLike, precision: str = "f32", context: Optional[int] = None) -> M:
        """A GPT from a Hugging Face model directory (config.json and model.safetensors, or
        its shards: GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM),
        with its weights. precision: "f32", "bf16", "f16" or "stored" (the files' dtype);
        context: the longest sequence (default: the model's max_position_embeddings).
        DtrainIOError naming the file for a missing or malformed directory,
        InvalidArgumentError naming what is unsupported."""
        config: Dict[str, Any] = {"precision": precision}
        if context is not None:
            config["context"] = int(context)
        path = os.fspath(dir)
        return cls._make(lambda opts: native.dt_module_create_from_hf(path, opts), config)

    def save_hf(self, dir: PathLike, precision: Optional[str] = None, architecture: Optional[str] = None,
                tokenizer_from: Optional[PathLike] = None, bos_token_id: Optional[int] = None,
                eos_token_id: Optional[int] = None, eos_token_ids: Optional[Union[str, Sequence[int]]] = None,
                max_shard_bytes: Optional[int] = None) -> None:
        """Writes this GPT as a Hugging Face directory that transformers loads (config.json,
        generation_config.json, model.safetensors or shards past max_shard_bytes), created
        if missing. precision: "f32", "bf16" or "f16" (default: the model's); architecture:
        default the one the config is an instance of; tokenizer_from: a directory whose
        tokenizer files are copied over; eos_token_ids: a list of ids (or "1,2"). After
        training through an Engine, use Engine.save_hf, which gathers the weights."""
        with contextlib.ExitStack() as stack:
            opts = options_ptr(hf_save_options(precision, architecture, tokenizer_from, bos_token_id, eos_token_id,
                                               eos_token_ids, max_shard_bytes), stack)
            native.dt_module_save_hf(self._h, os.fspath(dir), opts)

    @property
    def param_count(self) -> int:
        """Number of scalar parameters."""
        return native.dt_module_param_count(self._h)

    @property
    def param_names(self) -> List[str]:
        h = self._h
        return [native.dt_module_param_name(h, i) for i in range(native.dt_module_param_count_tensors(h))]

    def param(self, name: str) -> Tensor:
        """A tensor viewing parameter `name` (writes go to the weights)."""
        return Tensor(None, None, _ptr=native.dt_module_param(self._h, name))

    def forward(self, x: Tensor) -> Tensor:
        """Forward of a sequential or MLP model: x f32 [N, in] -> a new Tensor [N, out]."""
        return Tensor(None, None, _ptr=native.dt_module_forward(self._h, handle_of(x, Tensor, "x")))

    def backward(self, dy: Tensor) -> Tensor:
        """Backward of the last forward; accumulates gradients; returns dx."""
        return Tensor(None, None, _ptr=native.dt_module_backward(self._h, handle_of(dy, Tensor, "dy")))

    def zero_grad(self) -> None:
        native.dt_module_zero_grad(self._h)


def GPT(**config: Any) -> Model:
    """A GPT: preset ("gpt-tiny", "gpt-small", "llama-tiny") and any dt_module_create_gpt key
    (vocab_size, context, n_layer, n_head, d_model, seed, precision, ...)."""
    return Model._make(native.dt_module_create_gpt, config)


def gpt_param_count(**config: Any) -> int:
    """Number of parameters dtrain.GPT(**config) would hold, counted from the config without
    building the model or allocating (dt_module_gpt_param_count): size a model first, even
    one this machine could not hold. The same keys and errors as dtrain.GPT."""
    with contextlib.ExitStack() as stack:
        return native.dt_module_gpt_param_count(options_ptr(config, stack))


def MLP(sizes: Union[str, Sequence[int]], **config: Any) -> Model:
    """An MLP: sizes "in,hidden...,out" (or a list of ints), act, seed."""
    if not isinstance(sizes, str):
        sizes = ",".join(str(int(s)) for s in sizes)
    return Model._make(native.dt_module_create_mlp, dict(config, sizes=sizes))


def Sequential(layers: Union[str, Sequence[str]], **config: Any) -> Model:
    """A sequential network: layers "linear:4:32,gelu,..." (or a list of such strings)."""
    if not isinstance(layers, str):
        layers = ",".join(layers)
    return Model._make(native.dt_module_create_sequential, dict(config, layers=layers))


class Optimizer(Handle):
    """Optimizer(model, kind="adamw", **options): "adamw" (lr, beta1, beta2, eps,
    weight_decay) or "sgd" (lr, momentum, weight_decay, nesterov)."""

    _destroy = staticmethod(native.dt_optimizer_destroy)

    def __init__(self, model: Model, kind: str = "adamw", **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_optimizer_create(handle_of(model, Model, "model"), kind,
                                                        options_ptr(options, stack)))

    def step(self) -> None:
        """Updates the model from its accumulated gradients (host-driven loops)."""
        native.dt_optimizer_step(self._h)

    def set_lr(self, lr: float) -> None:
        native.dt_optimizer_set_lr(self._h, lr)


def loss(kind: str, pred: Tensor, target: Tensor) -> Tuple[float, Tensor]:
    """(mean loss, d loss / d pred) of "mse" or "cross_entropy"."""
    value, dpred = native.dt_loss(kind, handle_of(pred, Tensor, "pred"), handle_of(target, Tensor, "target"))
    return value, Tensor(None, None, _ptr=dpred)
