"""Cancellation: a CancelToken stops a running train step, eval or generate from another
thread within 100 ms, changes nothing, and the engine goes on working."""
import threading
import time

import pytest

import dtrain

np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def big():
    """A model whose train step runs long enough (>= 1 s here) to be cancelled in the middle,
    in small units (a layer of a micro-batch of 4 sequences) between which it checks."""
    model = dtrain.GPT(preset="gpt-tiny", n_layer=8, d_model=256, n_head=4, context=128, vocab_size=256, seed=1)
    opt = dtrain.Optimizer(model, "adamw", lr=1e-3)
    engine = dtrain.Engine(None, model, opt, micro_batches=4)
    rng = np.random.default_rng(0)
    x = dtrain.from_numpy(rng.integers(0, 256, (16, 128)).astype(np.int32))
    y = dtrain.from_numpy(rng.integers(0, 256, (16, 128)).astype(np.int32))
    start = time.monotonic()
    engine.train_step(x, y)  # also warms up: the first step allocates
    yield engine, x, y, time.monotonic() - start
    for h in (engine, opt, model, x, y):
        h.close()


def _cancel_during(call, duration):
    """Runs call(token), cancelling the token from another thread partway through; returns
    (seconds from the cancel request to the call's return, the exception raised)."""
    token = dtrain.CancelToken()
    when = {}

    def cancel_later():
        time.sleep(min(0.2, duration / 5))
        when["cancel"] = time.monotonic()
        token.cancel()

    canceller = threading.Thread(target=cancel_later)
    canceller.start()
    try:
        call(token)
        raised = None
    except dtrain.DtrainError as e:
        raised = e
    returned = time.monotonic()
    canceller.join()
    assert token.cancelled
    token.close()
    return returned - when["cancel"], raised


def test_cancel_in_the_middle_of_a_train_step(big):
    engine, x, y, duration = big
    step = engine.step
    latency, raised = _cancel_during(lambda token: engine.train_step(x, y, cancel=token), duration)
    assert isinstance(raised, dtrain.CancelledError), raised
    assert raised.status == 11 and raised.status_name == "DT_ERR_CANCELLED"
    assert latency < 0.1, "returned %.3f s after the cancel" % latency
    assert engine.step == step  # nothing changed
    loss = engine.train_step(x, y)  # and the engine still works, without the token
    assert loss > 0 and engine.step == step + 1


def test_cancel_in_the_middle_of_eval(big):
    engine, x, y, duration = big
    latency, raised = _cancel_during(lambda token: engine.eval(x, y, cancel=token), duration / 3)
    assert isinstance(raised, dtrain.CancelledError) and latency < 0.1
    assert engine.eval(x, y) > 0


def test_a_raised_token_fails_at_once_until_reset(big):
    engine, x, y, _ = big
    with dtrain.CancelToken() as token:
        token.cancel()
        token.cancel()  # idempotent
        step = engine.step
        with pytest.raises(dtrain.CancelledError):
            engine.train_step(x, y, cancel=token)
        with pytest.raises(dtrain.CancelledError):
            engine.generate([1, 2, 3], max_new_tokens=4, cancel=token)
        assert engine.step == step
        token.reset()
        assert not token.cancelled
        engine.train_step(x, y, cancel=token)
        assert engine.step == step + 1
    token.cancel()  # closed: nothing left to cancel, no error
    assert "closed" in repr(token)


def test_cancel_generate_from_its_callback():
    with dtrain.GPT(preset="gpt-tiny", seed=3) as model, dtrain.Optimizer(model) as opt, \
            dtrain.Engine(None, model, opt) as engine, dtrain.CancelToken() as token:
        seen = []

        def on_token(i, tok):
            seen.append(tok)
            if len(seen) == 3:
                token.cancel()

        with pytest.raises(dtrain.CancelledError):
            engine.generate([1, 2, 3], max_new_tokens=40, on_token=on_token, cancel=token)
        assert 3 <= len(seen) < 40
        assert len(engine.generate([1, 2, 3], max_new_tokens=5)) == 5


def test_cancel_argument_is_checked():
    with dtrain.GPT(preset="gpt-tiny") as model, dtrain.Optimizer(model) as opt, \
            dtrain.Engine(None, model, opt) as engine:
        with pytest.raises(TypeError, match="CancelToken"):
            engine.generate([1], max_new_tokens=2, cancel=True)


def test_cancel_and_close_from_different_threads():
    for _ in range(200):  # the token's lock orders a request and the destroy
        token = dtrain.CancelToken()
        other = threading.Thread(target=token.cancel)
        other.start()
        token.close()
        other.join()
