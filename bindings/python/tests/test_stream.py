"""Streaming: `for tok in engine.stream(...)` gives generate's tokens one by one; leaving the
loop early cancels the generation, joins its worker and leaks nothing."""
import gc
import threading

import pytest

import dtrain


@pytest.fixture
def engine():
    with dtrain.GPT(preset="gpt-tiny", seed=3) as model, dtrain.Optimizer(model) as opt, \
            dtrain.Engine(None, model, opt) as e:
        yield e


def _stream_threads():
    return [t for t in threading.enumerate() if t.name == "dtrain-stream"]


def test_stream_yields_what_generate_returns(engine):
    want = engine.generate(b"123+456=", max_new_tokens=8, temperature=0.0)
    assert list(engine.stream(b"123+456=", max_new_tokens=8, temperature=0.0)) == want
    pairs = list(engine.stream([[1, 2, 3], [4, 5]], max_new_tokens=3))
    assert sorted({i for i, _ in pairs}) == [0, 1] and len(pairs) == 6
    assert not _stream_threads()


def test_break_after_three_tokens_cancels_and_leaks_nothing(engine):
    engine.generate([1, 2, 3], max_new_tokens=60)  # the engine's own one-time buffers
    gc.collect()
    start = dtrain.memory_stats("cpu", "all")[0]
    threads = threading.active_count()
    got = []
    for tok in engine.stream([1, 2, 3], max_new_tokens=60):
        got.append(tok)
        if len(got) == 3:
            break
    assert len(got) == 3
    assert not _stream_threads() and threading.active_count() == threads
    assert dtrain.memory_stats("cpu", "all")[0] == start
    assert len(engine.generate([1, 2, 3], max_new_tokens=4)) == 4  # the engine still works


def test_close_and_garbage_collection_cancel_too(engine):
    stream = engine.stream([7, 8], max_new_tokens=60)
    assert isinstance(next(stream), int)
    stream.close()
    assert not _stream_threads()
    stream = engine.stream([7, 8], max_new_tokens=60)
    next(stream)
    del stream
    gc.collect()
    assert not _stream_threads()
    unstarted = engine.stream([7, 8])  # never iterated: no thread was started
    del unstarted
    assert not _stream_threads()


def test_errors_reach_the_loop(engine):
    with pytest.raises(dtrain.InvalidArgumentError, match="bogus"):
        list(engine.stream([1, 2], bogus=1))
    with pytest.raises(ValueError, match="at least one"):
        next(engine.stream([]))
    assert not _stream_threads()


def test_an_exception_in_on_token_stops_generate(engine):
    seen = []

    def on_token(i, tok):
        seen.append(tok)
        if len(seen) == 2:
            raise KeyError("enough")

    with pytest.raises(KeyError, match="enough"):
        engine.generate([1, 2, 3], max_new_tokens=40, on_token=on_token)
    assert len(seen) == 2  # not called again once it raised
