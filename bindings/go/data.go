package dtrain

import (
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Dataset is a set of fixed-length examples (dt_dataset): context input tokens and the
// context targets of each. Immutable; loaders keep it alive.
type Dataset struct{ obj *owned[cdt.Dataset] }

// NewDataset creates a dataset. kind "text" (opts "path", "context"), "tokens" ("path",
// "context", "width", "vocab_size") or "addition" ("digits", "size", "seed", "split").
func NewDataset(kind string, opts Options) (*Dataset, error) {
	return create[Dataset](opts, func(o cdt.Options, p *cdt.Dataset) cdt.Status {
		return cdt.Dt_dataset_create(kind, o, p)
	}, cdt.Dt_dataset_destroy)
}

func (d *Dataset) handle() (cdt.Dataset, error) { return handleOf(d) }

// Close releases the handle; loaders made from it keep the data alive. Idempotent.
func (d *Dataset) Close() error { return closeHandle(d) }

// Size returns the number of examples (0 for a closed dataset).
func (d *Dataset) Size() int { return int(peek(d, cdt.Dt_dataset_size)) }

// Context returns the tokens per example (T of the [B, T] batches; 0 for a closed dataset).
func (d *Dataset) Context() int { return int(peek(d, cdt.Dt_dataset_context)) }

// Example returns example index: its input tokens and its targets (-1: no loss there).
func (d *Dataset) Example(index int) (inputs, targets []int32, err error) {
	h, err := d.handle()
	if err != nil {
		return nil, nil, err
	}
	ctx := d.Context()
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
type Loader struct{ obj *owned[cdt.Loader] }

// NewLoader creates a loader. opts: "batch" (required), "seed" (default 0), "shuffle"
// (default true).
func NewLoader(dataset *Dataset, opts Options) (*Loader, error) {
	hd, err := dataset.handle()
	if err != nil {
		return nil, err
	}
	l, err := create[Loader](opts, func(o cdt.Options, p *cdt.Loader) cdt.Status {
		return cdt.Dt_loader_create(hd, o, p)
	}, cdt.Dt_loader_destroy)
	runtime.KeepAlive(dataset)
	return l, err
}

func (l *Loader) handle() (cdt.Loader, error) { return handleOf(l) }

// Close releases the loader. Idempotent.
func (l *Loader) Close() error { return closeHandle(l) }

// Next writes the next batch into inputs and targets (i32 CPU tensors [batch, context])
// and advances.
func (l *Loader) Next(inputs, targets *Tensor) error {
	return withTensors(l, []*Tensor{inputs, targets}, func(h cdt.Loader, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_loader_next(h, ts[0], ts[1])
	})
}

// BatchesPerEpoch returns the number of full batches per epoch (0 for a closed loader).
func (l *Loader) BatchesPerEpoch() int { return int(peek(l, cdt.Dt_loader_batches_per_epoch)) }

// Position returns where the next batch comes from: its epoch and index in the epoch (0, 0
// for a closed loader).
func (l *Loader) Position() (epoch, batchIndex int) {
	h, err := l.handle()
	if err != nil {
		return 0, 0
	}
	var e, b int64
	st := cdt.Dt_loader_position(h, &e, &b)
	runtime.KeepAlive(l)
	if !st.OK() {
		return 0, 0
	}
	return int(e), int(b)
}

// Seek moves to batch batchIndex of epoch.
func (l *Loader) Seek(epoch, batchIndex int) error {
	return invoke(l, func(h cdt.Loader) cdt.Status {
		return cdt.Dt_loader_seek(h, int64(epoch), int64(batchIndex))
	})
}
