"""Handles close in any order, twice, or by the garbage collector, and never crash."""
import gc
import itertools

import pytest

import dtrain


def _make():
    mesh = dtrain.Mesh("local", 2)
    model = dtrain.GPT(preset="gpt-tiny", seed=1)
    opt = dtrain.Optimizer(model, "adamw", lr=0.003)
    engine = dtrain.Engine(mesh, model, opt)
    data = dtrain.Dataset("addition", digits=3, seed=7)
    loader = dtrain.Loader(data, 4, seed=0)
    x, y = loader.new_batch()
    return [mesh, model, opt, engine, data, loader, x, y]


@pytest.mark.parametrize("order", list(itertools.islice(itertools.permutations(range(6)), 0, 720, 97)))
def test_any_close_order(order):
    handles = _make()
    for i in order:
        handles[i].close()
    for h in handles:
        h.close()
        h.close()  # idempotent
    assert all(h.closed for h in handles)


def test_engine_outlives_the_handles_it_was_made_from():
    mesh, model, opt, engine, data, loader, x, y = _make()
    loader.next(x, y)
    for h in (mesh, model, opt, data, loader):
        h.close()
    assert engine.train_step(x, y) > 0  # libdtrain keeps the parents alive
    engine.close()


def test_garbage_collection_after_close_does_not_double_free():
    for _ in range(50):
        handles = _make()
        for h in handles[::2]:
            h.close()
        del handles
    gc.collect()


def test_closed_handle_used_again_raises():
    mesh, model, opt, engine, data, loader, x, y = _make()
    engine.close()
    with pytest.raises(ValueError, match="Engine is closed"):
        engine.train_step(x, y)
    model.close()
    with pytest.raises(ValueError, match="Model is closed"):
        dtrain.Optimizer(model, "adamw")
    x.close()
    with pytest.raises(ValueError, match="Tensor is closed"):
        x.shape


def test_none_where_a_handle_is_required_is_type_error():
    with pytest.raises(TypeError, match="model must be a dtrain.Model"):
        dtrain.Optimizer(None, "adamw")
    with dtrain.GPT(preset="gpt-tiny") as model, dtrain.Optimizer(model) as opt:
        with pytest.raises(TypeError, match="optimizer"):
            dtrain.Engine(None, model, None)
        with pytest.raises(TypeError, match="mesh must be a dtrain.Mesh or None"):
            dtrain.Engine(model, model, opt)
        with dtrain.Engine(None, model, opt) as engine:  # no mesh: this process alone
            with pytest.raises(TypeError, match="inputs"):
                engine.train_step(None, None)
