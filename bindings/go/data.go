package dtrain

import (
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Dataset is a set of fixed-length examples (dt_dataset): context input tokens and the
// context targets of each. Immutable; loaders keep it alive.
type Dataset struct{ obj object[cdt.Dataset] }

// NewDataset creates a dataset. kind "text" (opts "path", "context"), "tokens" ("path",
// "context", "width", "vocab_size") or "addition" ("digits", "size", "seed", "split").
func NewDataset(kind string, opts Options) (*Dataset, error) {
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Dataset
	if err := check(cdt.Dt_dataset_create(kind, o, &p)); err != nil {
		return nil, err
	}
	d := &Dataset{}
	d.obj.set(p, cdt.Dt_dataset_destroy)
	runtime.SetFinalizer(d, func(d *Dataset) { d.obj.release() })
	return d, nil
}

func (d *Dataset) handle() (cdt.Dataset, error) {
	if d == nil {
		return 0, nilHandle("Dataset")
	}
	return d.obj.get("Dataset")
}

// Close releases the handle; loaders made from it keep the data alive. Idempotent.
func (d *Dataset) Close() error {
	if d != nil {
		runtime.SetFinalizer(d, nil)
		d.obj.release()
	}
	return nil
}

func (d *Dataset) int64Query(f func(cdt.Dataset, *int64) cdt.Status) (int, error) {
	h, err := d.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(f(h, &n))
	runtime.KeepAlive(d)
	return int(n), err
}

// Size returns the number of examples.
func (d *Dataset) Size() (int, error) { return d.int64Query(cdt.Dt_dataset_size) }

// Context returns the tokens per example (T of the [B, T] batches).
func (d *Dataset) Context() (int, error) { return d.int64Query(cdt.Dt_dataset_context) }

// Example returns example index: its input tokens and its targets (-1: no loss there).
func (d *Dataset) Example(index int) (inputs, targets []int32, err error) {
	ctx, err := d.Context()
	if err != nil {
		return nil, nil, err
	}
	h, err := d.handle()
	if err != nil {
		return nil, nil, err
	}
	inputs, targets = make([]int32, ctx), make([]int32, ctx)
	err = check(cdt.Dt_dataset_example(h, int64(index), &inputs[0], &targets[0]))
	runtime.KeepAlive(d)
	if err != nil {
		return nil, nil, err
	}
	return inputs, targets, nil
}

// Loader yields batches of a dataset in a seeded order (dt_loader); it keeps the dataset
// alive. One goroutine at a time.
type Loader struct{ obj object[cdt.Loader] }

// NewLoader creates a loader. opts: "batch" (required), "seed" (default 0), "shuffle"
// (default true).
func NewLoader(dataset *Dataset, opts Options) (*Loader, error) {
	hd, err := dataset.handle()
	if err != nil {
		return nil, err
	}
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Loader
	err = check(cdt.Dt_loader_create(hd, o, &p))
	runtime.KeepAlive(dataset)
	if err != nil {
		return nil, err
	}
	l := &Loader{}
	l.obj.set(p, cdt.Dt_loader_destroy)
	runtime.SetFinalizer(l, func(l *Loader) { l.obj.release() })
	return l, nil
}

func (l *Loader) handle() (cdt.Loader, error) {
	if l == nil {
		return 0, nilHandle("Loader")
	}
	return l.obj.get("Loader")
}

// Close releases the loader. Idempotent.
func (l *Loader) Close() error {
	if l != nil {
		runtime.SetFinalizer(l, nil)
		l.obj.release()
	}
	return nil
}

// Next writes the next batch into inputs and targets (i32 CPU tensors [batch, context])
// and advances.
func (l *Loader) Next(inputs, targets *Tensor) error {
	h, err := l.handle()
	if err != nil {
		return err
	}
	hi, err := inputs.handle()
	if err != nil {
		return err
	}
	ht, err := targets.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_loader_next(h, hi, ht))
	runtime.KeepAlive(l)
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(targets)
	return err
}

// BatchesPerEpoch returns the number of full batches per epoch.
func (l *Loader) BatchesPerEpoch() (int, error) {
	h, err := l.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(cdt.Dt_loader_batches_per_epoch(h, &n))
	runtime.KeepAlive(l)
	return int(n), err
}

// Position returns where the next batch comes from: its epoch and index in the epoch.
func (l *Loader) Position() (epoch, batchIndex int, err error) {
	h, err := l.handle()
	if err != nil {
		return 0, 0, err
	}
	var e, b int64
	err = check(cdt.Dt_loader_position(h, &e, &b))
	runtime.KeepAlive(l)
	return int(e), int(b), err
}

// Seek moves to batch batchIndex of epoch.
func (l *Loader) Seek(epoch, batchIndex int) error {
	h, err := l.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_loader_seek(h, int64(epoch), int64(batchIndex)))
	runtime.KeepAlive(l)
	return err
}
