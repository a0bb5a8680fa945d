"""The layout planner (dt_plan_json) from Python: a plan, a search, an unknown cluster."""
import pytest

import dtrain

TINY = {"n_layer": 2, "d_model": 64, "n_head": 2, "vocab_size": 256, "context": 64}


def test_plan_with_a_cluster_costs_the_step_and_each_rank():
    report = dtrain.plan(TINY, {"dp": 2, "zero": 1, "cluster": "cpu-default"})
    assert report["cost"]["step_s"] > 0
    assert report["cost"]["ranks"][0]["peak_bytes"] > 0


def test_plan_without_a_cluster_has_no_cost():
    report = dtrain.plan(TINY, {"dp": 2})
    assert "cost" not in report and report


def test_search_finds_the_fastest_layouts():
    report = dtrain.plan(TINY, {"cluster": "h100-node", "search": True, "global_batch": 16})
    assert report["search"]["best"]


def test_cluster_as_a_dict_is_passed_as_its_json():
    cluster = {"name": "mine", "cpu": True, "devices_per_host": 2, "device_memory": 16e9,
               "matmul_flops_f32": 50e9, "matmul_flops_16": 25e9, "attention_flops_f32": 10e9,
               "attention_flops_16": 5e9, "memory_bandwidth": 8e9, "intra": {"bandwidth": 4e9, "latency": 2e-5}}
    report = dtrain.plan(TINY, {"dp": 2, "cluster": cluster})
    assert report["cost"]["cluster"] == "mine" and report["cost"]["step_s"] > 0


def test_unknown_cluster_is_not_found_naming_the_built_in_ones():
    with pytest.raises(dtrain.NotFoundError, match="cpu-default"):
        dtrain.plan(TINY, {"cluster": "no-such-cluster"})
