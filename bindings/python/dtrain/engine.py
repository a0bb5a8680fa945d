"""dtrain.Engine: training steps, evaluation, generation and checkpoints of a GPT."""
import array
import contextlib

from . import native
from ._handle import Handle, handle_of, options_ptr
from ._json import read_json
from .mesh import Mesh
from .model import Model, Optimizer
from .tensor import Tensor


def _tokens(prompt):
    """A prompt as token ids: a str or bytes is its bytes (the byte tokenizer)."""
    if isinstance(prompt, str):
        prompt = prompt.encode("utf-8")
    return list(prompt)


class Engine(Handle):
    """Engine(mesh, model, optimizer, **options): mesh None (this process alone) or a mesh
    whose axes above 1 are "dp" and "tp". options: micro_batches, max_grad_norm, schedule,
    warmup_steps, total_steps, min_lr_ratio, loss_scale_init, bucket_bytes, zero (0-3)."""

    _destroy = staticmethod(native.dt_engine_destroy)

    def __init__(self, mesh, model, optimizer, **options):
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_engine_create(
                handle_of(mesh, Mesh, "mesh", allow_none=True), handle_of(model, Model, "model"),
                handle_of(optimizer, Optimizer, "optimizer"), options_ptr(options, stack)))

    def train_step(self, inputs, targets):
        """One optimizer step on i32 [B, T] tensors; returns the batch's mean loss (before
        the update). The GIL is released while it runs."""
        return native.dt_engine_train_step(self._h, handle_of(inputs, Tensor, "inputs"),
                                           handle_of(targets, Tensor, "targets"))

    def eval(self, inputs, targets):
        """The batch's mean loss, changing nothing."""
        return native.dt_engine_eval(self._h, handle_of(inputs, Tensor, "inputs"), handle_of(targets, Tensor, "targets"))

    @property
    def step(self):
        """Optimizer steps taken so far."""
        return native.dt_engine_step(self._h)

    def last_stats(self):
        """The last train step's metrics (dict), or None before any step."""
        return read_json(lambda buf: native.dt_engine_last_stats_json(self._h, buf))

    def last_generate_stats(self):
        return read_json(lambda buf: native.dt_engine_last_generate_stats_json(self._h, buf))

    def save(self, path_stem):
        native.dt_engine_save(self._h, path_stem)

    def load(self, path_stem):
        native.dt_engine_load(self._h, path_stem)

    def generate(self, prompts, max_new_tokens=16, on_token=None, **options):
        """Continues each prompt (a list of token ids, or str/bytes as bytes). Returns a list
        of lists of new token ids; a single prompt (not in a list) returns one list.
        on_token(prompt_index, token), if given, is called with each token as it is made.
        options: temperature, top_k, top_p, seed, stop_token."""
        single = isinstance(prompts, (str, bytes)) or (len(prompts) > 0 and isinstance(prompts[0], int))
        rows = [_tokens(prompts)] if single else [_tokens(p) for p in prompts]
        if not rows or any(len(r) == 0 for r in rows):
            raise ValueError("prompts: at least one prompt, each of at least one token")
        flat = array.array("i", [t for r in rows for t in r])
        lengths = array.array("q", [len(r) for r in rows])
        cap = max(int(max_new_tokens), 1)
        out = array.array("i", bytes(4 * cap * len(rows)))
        out_lengths = array.array("q", bytes(8 * len(rows)))
        with contextlib.ExitStack() as stack:
            opts = options_ptr(dict(options, max_new_tokens=int(max_new_tokens)), stack)
            if on_token is None:
                native.dt_engine_generate(self._h, flat, lengths, len(rows), opts, out, cap, out_lengths)
            else:
                native.dt_engine_generate_stream(self._h, flat, lengths, len(rows), opts, on_token, out, cap,
                                                 out_lengths)
        result = [out[i * cap:i * cap + out_lengths[i]].tolist() for i in range(len(rows))]
        return result[0] if single else result

    def generate_text(self, prompt, max_new_tokens=16, **options):
        """generate() for one text prompt, decoded as bytes (undecodable bytes replaced)."""
        return bytes(self.generate(prompt.encode("utf-8"), max_new_tokens, **options)).decode("utf-8", "replace")
