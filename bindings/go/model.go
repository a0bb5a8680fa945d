package dtrain

import (
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Model is a module with named parameters (dt_module): a GPT, an MLP or a sequential
// container. Optimizers, engines and parameter views keep it alive.
type Model struct{ obj object[cdt.Module] }

func wrapModel(p cdt.Module) *Model {
	m := &Model{}
	m.obj.set(p, cdt.Dt_module_destroy)
	runtime.SetFinalizer(m, func(m *Model) { m.obj.release() })
	return m
}

func createModel(config Options, create func(cdt.Options, *cdt.Module) cdt.Status) (*Model, error) {
	o, free, err := newOptions(config)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Module
	if err := check(create(o, &p)); err != nil {
		return nil, err
	}
	return wrapModel(p), nil
}

// NewGPT creates a GPT. config: nil (the "gpt-small" shape) or keys such as "preset"
// ("gpt-tiny", "gpt-small", "llama-tiny"), "n_layer", "d_model", "seed", "precision".
func NewGPT(config Options) (*Model, error) { return createModel(config, cdt.Dt_module_create_gpt) }

// NewMLP creates an MLP: config "sizes" (e.g. "4,32,1"), "act", "seed".
func NewMLP(config Options) (*Model, error) { return createModel(config, cdt.Dt_module_create_mlp) }

// NewSequential creates a sequential container: config "layers" (e.g.
// "linear:4:32,gelu,linear:32:1"), "seed", "init_std".
func NewSequential(config Options) (*Model, error) {
	return createModel(config, cdt.Dt_module_create_sequential)
}

// NewModelFromCheckpoint creates the GPT that the checkpoint at pathStem was saved from,
// freshly initialized; load its weights with Engine.Load.
func NewModelFromCheckpoint(pathStem string) (*Model, error) {
	var p cdt.Module
	if err := check(cdt.Dt_module_create_from_checkpoint(pathStem, &p)); err != nil {
		return nil, err
	}
	return wrapModel(p), nil
}

func (m *Model) handle() (cdt.Module, error) {
	if m == nil {
		return 0, nilHandle("Model")
	}
	return m.obj.get("Model")
}

// Close releases the handle; the model lives on while an optimizer, engine or parameter
// view made from it does. Idempotent.
func (m *Model) Close() error {
	if m != nil {
		runtime.SetFinalizer(m, nil)
		m.obj.release()
	}
	return nil
}

// ParamCount returns the number of scalar parameters.
func (m *Model) ParamCount() (int, error) {
	h, err := m.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(cdt.Dt_module_param_count(h, &n))
	runtime.KeepAlive(m)
	return int(n), err
}

// ParamNames returns the names of the parameter tensors, in their fixed order.
func (m *Model) ParamNames() ([]string, error) {
	h, err := m.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	var n int64
	if err := check(cdt.Dt_module_param_count_tensors(h, &n)); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		if err := check(cdt.Dt_module_param_name(h, int64(i), &names[i])); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// Param returns a tensor that views parameter name (ErrNotFound if there is none): reads
// see the current weights, and copies into it write them (between steps only).
func (m *Model) Param(name string) (*Tensor, error) {
	h, err := m.handle()
	if err != nil {
		return nil, err
	}
	var p cdt.Tensor
	err = check(cdt.Dt_module_param(h, name, &p))
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// Forward runs a sequential or MLP model on x (f32 [N, in]) and returns y [N, out].
func (m *Model) Forward(x *Tensor) (*Tensor, error) {
	h, err := m.handle()
	if err != nil {
		return nil, err
	}
	hx, err := x.handle()
	if err != nil {
		return nil, err
	}
	var p cdt.Tensor
	err = check(cdt.Dt_module_forward(h, hx, &p))
	runtime.KeepAlive(m)
	runtime.KeepAlive(x)
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// Backward runs the backward of the last Forward from dy, accumulating every parameter's
// gradient, and returns the input's gradient dx.
func (m *Model) Backward(dy *Tensor) (*Tensor, error) {
	h, err := m.handle()
	if err != nil {
		return nil, err
	}
	hdy, err := dy.handle()
	if err != nil {
		return nil, err
	}
	var p cdt.Tensor
	err = check(cdt.Dt_module_backward(h, hdy, &p))
	runtime.KeepAlive(m)
	runtime.KeepAlive(dy)
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// ZeroGrad sets every parameter's gradient to zero.
func (m *Model) ZeroGrad() error {
	h, err := m.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_module_zero_grad(h))
	runtime.KeepAlive(m)
	return err
}

// Loss computes a loss ("mse" or "cross_entropy") of pred against target and returns it
// with its gradient d loss / d pred.
func Loss(kind string, pred, target *Tensor) (float64, *Tensor, error) {
	hp, err := pred.handle()
	if err != nil {
		return 0, nil, err
	}
	ht, err := target.handle()
	if err != nil {
		return 0, nil, err
	}
	var loss float64
	var p cdt.Tensor
	err = check(cdt.Dt_loss(kind, hp, ht, &loss, &p))
	runtime.KeepAlive(pred)
	runtime.KeepAlive(target)
	if err != nil {
		return 0, nil, err
	}
	return loss, wrapTensor(p), nil
}

// Optimizer updates the parameters of one model (dt_optimizer); it keeps the model alive.
type Optimizer struct{ obj object[cdt.Optimizer] }

// NewOptimizer creates an optimizer over every parameter of model. kind: "adamw" (opts
// "lr", "beta1", "beta2", "eps", "weight_decay") or "sgd" ("lr", "momentum",
// "weight_decay", "nesterov").
func NewOptimizer(model *Model, kind string, opts Options) (*Optimizer, error) {
	hm, err := model.handle()
	if err != nil {
		return nil, err
	}
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Optimizer
	err = check(cdt.Dt_optimizer_create(hm, kind, o, &p))
	runtime.KeepAlive(model)
	if err != nil {
		return nil, err
	}
	opt := &Optimizer{}
	opt.obj.set(p, cdt.Dt_optimizer_destroy)
	runtime.SetFinalizer(opt, func(o *Optimizer) { o.obj.release() })
	return opt, nil
}

func (o *Optimizer) handle() (cdt.Optimizer, error) {
	if o == nil {
		return 0, nilHandle("Optimizer")
	}
	return o.obj.get("Optimizer")
}

// Close releases the handle; an engine using the optimizer keeps it alive. Idempotent.
func (o *Optimizer) Close() error {
	if o != nil {
		runtime.SetFinalizer(o, nil)
		o.obj.release()
	}
	return nil
}

// Step updates every parameter from its accumulated gradient (for host-driven loops; an
// Engine steps by itself).
func (o *Optimizer) Step() error {
	h, err := o.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_optimizer_step(h))
	runtime.KeepAlive(o)
	return err
}

// SetLR sets the learning rate of the following steps.
func (o *Optimizer) SetLR(lr float64) error {
	h, err := o.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_optimizer_set_lr(h, lr))
	runtime.KeepAlive(o)
	return err
}
