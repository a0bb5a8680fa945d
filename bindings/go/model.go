package dtrain

import (
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Model is a module with named parameters (dt_module): a GPT, an MLP or a sequential
// container. Optimizers, engines and parameter views keep it alive.
type Model struct{ obj *owned[cdt.Module] }

// NewGPT creates a GPT. config: nil (the "gpt-small" shape) or keys such as "preset"
// ("gpt-tiny", "gpt-small", "llama-tiny"), "n_layer", "d_model", "seed", "precision".
func NewGPT(config Options) (*Model, error) {
	return create[Model](config, cdt.Dt_module_create_gpt, cdt.Dt_module_destroy)
}

// GPTParamCount returns the number of parameters NewGPT(config) would hold, counted from
// the config without building the model or allocating: size a model first, even one this
// machine could not hold. The same keys and errors as NewGPT.
func GPTParamCount(config Options) (int64, error) {
	o, free, err := newOptions(config)
	if err != nil {
		return 0, err
	}
	defer free()
	var n int64
	if err := check(cdt.Dt_module_gpt_param_count(o, &n)); err != nil {
		return 0, err
	}
	return n, nil
}

// NewMLP creates an MLP: config "sizes" (e.g. "4,32,1"), "act", "seed".
func NewMLP(config Options) (*Model, error) {
	return create[Model](config, cdt.Dt_module_create_mlp, cdt.Dt_module_destroy)
}

// NewSequential creates a sequential container: config "layers" (e.g.
// "linear:4:32,gelu,linear:32:1"), "seed", "init_std".
func NewSequential(config Options) (*Model, error) {
	return create[Model](config, cdt.Dt_module_create_sequential, cdt.Dt_module_destroy)
}

// NewModelFromCheckpoint creates the GPT that the checkpoint at pathStem was saved from,
// freshly initialized; load its weights with Engine.Load.
func NewModelFromCheckpoint(pathStem string) (*Model, error) {
	var p cdt.Module
	if err := check(cdt.Dt_module_create_from_checkpoint(pathStem, &p)); err != nil {
		return nil, err
	}
	return wrap[Model](p, cdt.Dt_module_destroy), nil
}

func (m *Model) handle() (cdt.Module, error) { return handleOf(m) }

// Close releases the handle; the model lives on while an optimizer, engine or parameter
// view made from it does. Idempotent.
func (m *Model) Close() error { return closeHandle(m) }

// ParamCount returns the number of scalar parameters (0 for a closed model).
func (m *Model) ParamCount() int { return int(peek(m, cdt.Dt_module_param_count)) }

// ParamNames returns the names of the parameter tensors, in their fixed order (nil for a
// closed model).
func (m *Model) ParamNames() []string {
	n := peek(m, cdt.Dt_module_param_count_tensors)
	names := make([]string, n)
	for i := range names {
		var err error
		names[i], err = query(m, func(h cdt.Module, out *string) cdt.Status {
			return cdt.Dt_module_param_name(h, int64(i), out)
		})
		if err != nil {
			return nil // closed meanwhile by another goroutine, against the rules
		}
	}
	if n == 0 {
		return nil
	}
	return names
}

// Param returns a tensor that views parameter name (ErrNotFound if there is none): reads
// see the current weights, and copies into it write them (between steps only).
func (m *Model) Param(name string) (*Tensor, error) {
	p, err := query(m, func(h cdt.Module, out *cdt.Tensor) cdt.Status {
		return cdt.Dt_module_param(h, name, out)
	})
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// Forward runs a sequential or MLP model on x (f32 [N, in]) and returns y [N, out].
func (m *Model) Forward(x *Tensor) (*Tensor, error) { return m.pass(cdt.Dt_module_forward, x) }

// Backward runs the backward of the last Forward from dy, accumulating every parameter's
// gradient, and returns the input's gradient dx.
func (m *Model) Backward(dy *Tensor) (*Tensor, error) { return m.pass(cdt.Dt_module_backward, dy) }

type passFunc func(cdt.Module, cdt.Tensor, *cdt.Tensor) cdt.Status

// pass runs Forward's or Backward's native call on the model and x, keeping both alive
// through it, and wraps the tensor it makes.
func (m *Model) pass(f passFunc, x *Tensor) (*Tensor, error) {
	var p cdt.Tensor
	err := withTensors(m, []*Tensor{x}, func(h cdt.Module, ts []cdt.Tensor) cdt.Status {
		return f(h, ts[0], &p)
	})
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// ZeroGrad sets every parameter's gradient to zero.
func (m *Model) ZeroGrad() error { return invoke(m, cdt.Dt_module_zero_grad) }

// Loss computes a loss ("mse" or "cross_entropy") of pred against target and returns it
// with its gradient d loss / d pred.
func Loss(kind string, pred, target *Tensor) (float64, *Tensor, error) {
	var loss float64
	var p cdt.Tensor
	err := withTensors(pred, []*Tensor{target}, func(hp cdt.Tensor, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_loss(kind, hp, ts[0], &loss, &p)
	})
	if err != nil {
		return 0, nil, err
	}
	return loss, wrapTensor(p), nil
}

// Optimizer updates the parameters of one model (dt_optimizer); it keeps the model alive.
type Optimizer struct{ obj *owned[cdt.Optimizer] }

// NewOptimizer creates an optimizer over every parameter of model. kind: "adamw" (opts
// "lr", "beta1", "beta2", "eps", "weight_decay") or "sgd" ("lr", "momentum",
// "weight_decay", "nesterov").
func NewOptimizer(model *Model, kind string, opts Options) (*Optimizer, error) {
	hm, err := model.handle()
	if err != nil {
		return nil, err
	}
	opt, err := create[Optimizer](opts, func(o cdt.Options, p *cdt.Optimizer) cdt.Status {
		return cdt.Dt_optimizer_create(hm, kind, o, p)
	}, cdt.Dt_optimizer_destroy)
	runtime.KeepAlive(model)
	return opt, err
}

func (o *Optimizer) handle() (cdt.Optimizer, error) { return handleOf(o) }

// Close releases the handle; an engine using the optimizer keeps it alive. Idempotent.
func (o *Optimizer) Close() error { return closeHandle(o) }

// Step updates every parameter from its accumulated gradient (for host-driven loops; an
// Engine steps by itself).
func (o *Optimizer) Step() error { return invoke(o, cdt.Dt_optimizer_step) }

// SetLR sets the learning rate of the following steps.
func (o *Optimizer) SetLR(lr float64) error {
	return invoke(o, func(h cdt.Optimizer) cdt.Status { return cdt.Dt_optimizer_set_lr(h, lr) })
}
