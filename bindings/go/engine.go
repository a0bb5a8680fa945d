package dtrain

import (
	"math"
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Engine trains a GPT with an optimizer of it, alone or data parallel over a mesh, and
// evaluates, generates from and checkpoints it (dt_engine). It keeps its mesh, model and
// optimizer alive, so those may be closed first.
type Engine struct{ obj *owned[cdt.Engine] }

// NewEngine creates an engine. mesh: nil (this process alone) or a mesh whose axes above 1
// are "dp" (data parallel) and "tp" (tensor parallel). model: a GPT; optimizer: made over model. opts: nil or
// "micro_batches", "max_grad_norm", "schedule", "warmup_steps", "total_steps",
// "min_lr_ratio", "loss_scale_init", "loss_scale_growth_interval", "bucket_bytes", "zero".
func NewEngine(mesh *Mesh, model *Model, optimizer *Optimizer, opts Options) (*Engine, error) {
	hmesh, err := optionalMesh(mesh)
	if err != nil {
		return nil, err
	}
	hm, err := model.handle()
	if err != nil {
		return nil, err
	}
	ho, err := optimizer.handle()
	if err != nil {
		return nil, err
	}
	e, err := create[Engine](opts, func(o cdt.Options, p *cdt.Engine) cdt.Status {
		return cdt.Dt_engine_create(hmesh, hm, ho, o, p)
	}, cdt.Dt_engine_destroy)
	runtime.KeepAlive(mesh)
	runtime.KeepAlive(model)
	runtime.KeepAlive(optimizer)
	return e, err
}

func (e *Engine) handle() (cdt.Engine, error) { return handleOf(e) }

// Close releases the engine and its references to the mesh, model and optimizer.
// Idempotent.
func (e *Engine) Close() error { return closeHandle(e) }

type batchFunc func(cdt.Engine, cdt.Tensor, cdt.Tensor, *float64) cdt.Status

// batch runs TrainStep's or Eval's native call on a batch and returns the loss it fills.
func (e *Engine) batch(f batchFunc, inputs, targets *Tensor) (float64, error) {
	var loss float64
	err := withTensors(e, []*Tensor{inputs, targets}, func(h cdt.Engine, ts []cdt.Tensor) cdt.Status {
		return f(h, ts[0], ts[1], &loss)
	})
	return loss, err
}

// TrainStep takes one optimizer step on a batch (inputs, targets: i32 [B, T] CPU tensors)
// and returns the batch's mean loss before the update.
func (e *Engine) TrainStep(inputs, targets *Tensor) (float64, error) {
	return e.batch(cdt.Dt_engine_train_step, inputs, targets)
}

// Eval returns the mean loss of a batch without changing anything.
func (e *Engine) Eval(inputs, targets *Tensor) (float64, error) {
	return e.batch(cdt.Dt_engine_eval, inputs, targets)
}

// Save writes parameters and optimizer state as "<pathStem>.index.json" and a data file.
func (e *Engine) Save(pathStem string) error {
	return invoke(e, func(h cdt.Engine) cdt.Status { return cdt.Dt_engine_save(h, pathStem) })
}

// Load reads what Save wrote at pathStem (ErrIO for a missing or corrupt file); on
// failure nothing changed.
func (e *Engine) Load(pathStem string) error {
	return invoke(e, func(h cdt.Engine) cdt.Status { return cdt.Dt_engine_load(h, pathStem) })
}

// Step returns the optimizer steps taken so far (restored by Load); 0 for a closed engine.
func (e *Engine) Step() int { return int(peek(e, cdt.Dt_engine_step)) }

// maxGenerateCapacity bounds what Generate allocates per prompt for an absurd
// max_new_tokens (which the library then rejects: it must fit the context).
const maxGenerateCapacity = 1 << 20

// Generate continues each prompt (token ids) and returns the new tokens of each. opts: nil
// or "max_new_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
// "stop_token", "stop_tokens" (a []int32 such as a TokenizerInfo's EOSTokenIDs, or "3,7":
// a prompt ends after emitting one of them).
func (e *Engine) Generate(prompts [][]int32, opts Options) ([][]int32, error) {
	g, err := e.prepareGenerate("Generate", prompts, opts)
	if err != nil {
		return nil, err
	}
	defer g.free()
	err = check(cdt.Dt_engine_generate(g.engine, &g.tokens[0], &g.lengths[0], g.n, g.opts,
		&g.out[0], g.capacity, &g.outLengths[0]))
	runtime.KeepAlive(e)
	if err != nil {
		return nil, err
	}
	return g.result(), nil
}

// generateArgs is one generate call's arguments in the C layout: the prompts one after
// another with their lengths, the options, and the output rows (n rows of capacity tokens)
// and lengths the call fills.
type generateArgs struct {
	engine     cdt.Engine
	tokens     []int32
	lengths    []int64
	n          int32
	opts       cdt.Options
	free       func() // releases opts
	out        []int32
	capacity   int64
	outLengths []int64
}

// prepareGenerate checks e and the prompts of a Generate, GenerateStream or Stream (what
// names the method in the binding's errors) and lays out the call's arguments. The caller
// calls g.free and keeps e alive until the native call has returned.
func (e *Engine) prepareGenerate(what string, prompts [][]int32, opts Options) (*generateArgs, error) {
	h, err := e.handle()
	if err != nil {
		return nil, err
	}
	if len(prompts) == 0 || len(prompts) > math.MaxInt32 {
		return nil, invalid("%s needs 1 to %d prompts, not %d", what, math.MaxInt32, len(prompts))
	}
	capacity := int64(16)
	if n, ok := intOption(opts, "max_new_tokens"); ok {
		capacity = n
	}
	if capacity < 1 {
		capacity = 1
	} else if capacity > maxGenerateCapacity {
		capacity = maxGenerateCapacity
	}
	g := &generateArgs{engine: h, n: int32(len(prompts)), capacity: capacity,
		lengths: make([]int64, len(prompts))}
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, invalid("prompt %d is empty; every prompt needs at least one token", i)
		}
		g.tokens = append(g.tokens, p...)
		g.lengths[i] = int64(len(p))
	}
	if g.opts, g.free, err = newOptions(opts); err != nil {
		return nil, err
	}
	g.out = make([]int32, int64(len(prompts))*capacity)
	g.outLengths = make([]int64, len(prompts))
	return g, nil
}

// result returns each prompt's row of new tokens, once the call has filled the outputs.
func (g *generateArgs) result() [][]int32 {
	rows := make([][]int32, g.n)
	for i := range rows {
		start := int64(i) * g.capacity
		end := start + g.outLengths[i]
		rows[i] = g.out[start:end:end]
	}
	return rows
}

// LastStatsJSON returns the last train step's metrics as one JSON line ("" before any).
func (e *Engine) LastStatsJSON() (string, error) {
	return reportJSON(e, cdt.Dt_engine_last_stats_json)
}

// LastGenerateStatsJSON returns the last Generate's statistics as JSON ("" before any).
func (e *Engine) LastGenerateStatsJSON() (string, error) {
	return reportJSON(e, cdt.Dt_engine_last_generate_stats_json)
}
