"""dtrain.Dataset and dtrain.Loader: fixed-length examples and seeded batches of them."""
import array
import contextlib

from . import native
from ._handle import Handle, handle_of, options_ptr
from .tensor import I32, Tensor


class Dataset(Handle):
    """Dataset(kind, **options): "text" (path, context), "tokens" (path, context, width,
    vocab_size) or "addition" (digits, size, seed, split)."""

    _destroy = staticmethod(native.dt_dataset_destroy)

    def __init__(self, kind, **options):
        with contextlib.ExitStack() as stack:
            super().__init__(native.dt_dataset_create(kind, options_ptr(options, stack)))

    def __len__(self):
        return native.dt_dataset_size(self._h)

    @property
    def context(self):
        return native.dt_dataset_context(self._h)

    def example(self, index):
        """(inputs, targets) of example `index` as lists of token ids."""
        n = self.context
        inputs, targets = array.array("i", bytes(4 * n)), array.array("i", bytes(4 * n))
        native.dt_dataset_example(self._h, index, inputs, targets)
        return inputs.tolist(), targets.tolist()


class Loader(Handle):
    """Loader(dataset, batch, seed=0, shuffle=True): batches in a seeded order. Iterating
    yields (inputs, targets) tensors, the same two reused for every batch."""

    _destroy = staticmethod(native.dt_loader_destroy)

    def __init__(self, dataset, batch, **options):
        with contextlib.ExitStack() as stack:
            ptr = native.dt_loader_create(handle_of(dataset, Dataset, "dataset"),
                                          options_ptr(dict(options, batch=batch), stack))
        super().__init__(ptr)
        self.batch, self.context = batch, dataset.context

    def new_batch(self):
        """Two i32 tensors [batch, context] to pass to next()."""
        return Tensor(I32, (self.batch, self.context)), Tensor(I32, (self.batch, self.context))

    def next(self, inputs, targets):
        """Writes the next batch into inputs and targets, then advances."""
        native.dt_loader_next(self._h, handle_of(inputs, Tensor, "inputs"), handle_of(targets, Tensor, "targets"))
        return inputs, targets

    @property
    def batches_per_epoch(self):
        return native.dt_loader_batches_per_epoch(self._h)

    @property
    def position(self):
        """(epoch, batch index) of the next batch."""
        return tuple(native.dt_loader_position(self._h))

    def seek(self, epoch, batch_index):
        native.dt_loader_seek(self._h, epoch, batch_index)
