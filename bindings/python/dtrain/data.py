"""dtrain.Dataset and dtrain.Loader: fixed-length examples and seeded batches of them."""
from __future__ import annotations

import array
import contextlib
from typing import Any, Iterator, List, Tuple

from . import native
from ._handle import Handle, handle_of, options_ptr
from .tensor import I32, Tensor


class Dataset(Handle):
    """Dataset(kind, **options): "text" (path, context), "tokens" (path, context, width,
    vocab_size) or "addition" (digits, size, seed, split)."""

    _destroy = staticmethod(native.dt_dataset_destroy)

    def __init__(self, kind: str, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_dataset_create(kind, options_ptr(options, stack)))

    def __len__(self) -> int:
        return native.dt_dataset_size(self._h)

    @property
    def context(self) -> int:
        return native.dt_dataset_context(self._h)

    def example(self, index: int) -> Tuple[List[int], List[int]]:
        """(inputs, targets) of example `index` as lists of token ids."""
        n = self.context
        inputs, targets = array.array("i", bytes(4 * n)), array.array("i", bytes(4 * n))
        native.dt_dataset_example(self._h, index, inputs, targets)
        return inputs.tolist(), targets.tolist()


class Loader(Handle):
    """Loader(dataset, batch, seed=0, shuffle=True): batches in a seeded order.

        for inputs, targets in loader:      # the rest of the current epoch
            engine.train_step(inputs, targets)

    Iterating yields (inputs, targets), i32 [batch, context] tensors, the same two reused
    for every batch of that loop (copy what you keep), from the loader's position to the
    end of its epoch; the next loop goes on with the next epoch. next() is the same, one
    batch at a time, into tensors you pass."""

    _destroy = staticmethod(native.dt_loader_destroy)

    def __init__(self, dataset: Dataset, batch: int, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            ptr = native.dt_loader_create(handle_of(dataset, Dataset, "dataset"),
                                          options_ptr(dict(options, batch=batch), stack))
        super().__init__(ptr)
        self.batch, self.context = batch, dataset.context

    def new_batch(self) -> Tuple[Tensor, Tensor]:
        """Two i32 tensors [batch, context] to pass to next()."""
        return Tensor(I32, (self.batch, self.context)), Tensor(I32, (self.batch, self.context))

    def next(self, inputs: Tensor, targets: Tensor) -> Tuple[Tensor, Tensor]:
        """Writes the next batch into inputs and targets, then advances."""
        native.dt_loader_next(self._h, handle_of(inputs, Tensor, "inputs"), handle_of(targets, Tensor, "targets"))
        return inputs, targets

    def __iter__(self) -> Iterator[Tuple[Tensor, Tensor]]:
        _, index = self.position
        count = self.batches_per_epoch
        inputs, targets = self.new_batch()
        for _ in range(index if index < count else 0, count):  # index == count: at an epoch's end
            yield self.next(inputs, targets)

    @property
    def batches_per_epoch(self) -> int:
        return native.dt_loader_batches_per_epoch(self._h)

    @property
    def position(self) -> Tuple[int, int]:
        """(epoch, batch index) of the next batch."""
        return tuple(native.dt_loader_position(self._h))  # type: ignore[return-value]

    def seek(self, epoch: int, batch_index: int) -> None:
        native.dt_loader_seek(self._h, epoch, batch_index)
