import pytest

import dtrain


@pytest.fixture
def gpt_setup():
    """The samples' configuration: a tiny GPT, DDP over two in-process ranks, addition."""
    handles = {}
    handles["mesh"] = dtrain.Mesh("local", 2)
    handles["model"] = dtrain.GPT(preset="gpt-tiny", seed=1)
    handles["optimizer"] = dtrain.Optimizer(handles["model"], "adamw", lr=0.003)
    handles["engine"] = dtrain.Engine(handles["mesh"], handles["model"], handles["optimizer"])
    handles["data"] = dtrain.Dataset("addition", digits=3, seed=7, split="train")
    handles["loader"] = dtrain.Loader(handles["data"], 16, seed=0)
    yield handles
    for h in handles.values():
        h.close()
