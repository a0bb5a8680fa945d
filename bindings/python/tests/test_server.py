"""Serving through the binding: a Server's tokens are generate's, cancel, errors, stats."""
import threading

import pytest

import dtrain

PROMPTS = ([5, 17, 42, 9], [3, 1, 4, 1, 5, 9, 2, 6])


@pytest.fixture
def model():
    with dtrain.GPT(preset="gpt-tiny", seed=3) as m:
        yield m


def _generated_alone(model, prompt):
    """What Engine.generate gives the prompt alone: greedy, 5 tokens."""
    with dtrain.Optimizer(model, "sgd", lr=0.0) as opt, dtrain.Engine(None, model, opt) as engine:
        return engine.generate(list(prompt), max_new_tokens=5, temperature=0.0)


def test_two_requests_give_what_generate_gives_each_alone(model):
    want = [_generated_alone(model, p) for p in PROMPTS]
    with dtrain.Server(model, block_size=4, kv_blocks=32) as server:
        assert server.context == 64 and server.vocab_size > 0
        requests = [server.submit(p, max_tokens=5, temperature=0.0) for p in PROMPTS]
        got = [None, None]

        def read(i):  # each request read on its own thread: polls release the GIL
            got[i] = list(requests[i])

        threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == want
        assert all(r.state == "finished" and r.done for r in requests)
        assert list(requests[0]) == []  # an ended request stays ended
        stats = server.stats()
        assert stats["requests"]["finished"] == 2
        assert "dtrain_requests" in server.metrics()
        server.drain(10000)
        with pytest.raises(dtrain.UnavailableError):
            server.submit(PROMPTS[0])


def test_cancel_ends_a_long_request(model):
    with dtrain.Server(model, block_size=4, kv_blocks=32) as server:
        # The request takes some milliseconds; should it end before the cancel comes (a
        # busy machine), cancel() says so and the test tries again.
        for attempt in range(5):
            request = server.submit([1, 2, 3], max_tokens=60)
            if request.cancel():
                break
        else:
            pytest.fail("every request ended before cancel() reached it")
        tokens = list(request)
        assert request.state == "aborted" and len(tokens) < 60
        assert not request.cancel()  # already ended
        assert server.stats()["requests"]["aborted"] == 1


def test_bad_options_name_the_key(model):
    with pytest.raises(dtrain.InvalidArgumentError, match="kv_blokcs"):
        dtrain.Server(model, kv_blokcs=32)
    with dtrain.Server(model, block_size=4, kv_blocks=32) as server:
        with pytest.raises(dtrain.InvalidArgumentError, match="max_tokenz"):
            server.submit([1, 2], max_tokenz=3)
        with pytest.raises(ValueError):
            server.submit([])
        # stop_tokens as a list: the output ends after the first of them.
        first = server.generate([7, 8], max_tokens=5)[0]
        assert server.generate(b"\x07\x08", max_tokens=5)[0] == first  # bytes are token ids
        assert server.generate([7, 8], max_tokens=5, stop_tokens=[first]) == [first]
    with pytest.raises(ValueError, match="closed"):
        server.stats()
