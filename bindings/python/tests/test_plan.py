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


def test_median_of_calibrations_and_a_bad_one_named():
    def cluster(eff):
        return {"name": "m", "devices_per_host": 2, "device_memory": 1e9, "matmul_flops_f32": 1e11,
                "matmul_flops_16": 1e11, "attention_flops_f32": 1e10, "attention_flops_16": 1e10,
                "memory_bandwidth": 1e10, "compute_efficiency": eff, "intra": {"bandwidth": 1e9, "latency": 1e-6}}
    assert dtrain.median_cluster([cluster(0.9), cluster(1.2), cluster(1.0)])["compute_efficiency"] == 1.0
    with pytest.raises(dtrain.InvalidArgumentError, match=r"clusters\[1\]"):
        dtrain.median_cluster([cluster(1.0), {"name": 3}])


def test_unknown_cluster_is_not_found_naming_the_built_in_ones():
    with pytest.raises(dtrain.NotFoundError, match="cpu-default"):
        dtrain.plan(TINY, {"cluster": "no-such-cluster"})


def test_serving_costs_a_layout_and_searches_them_all():
    cost = dtrain.plan(TINY, {"serve": True, "cluster": "h100-node", "dp": 2, "tp": 2, "prompt": 32, "output": 16})
    c = cost["serve_cost"]
    assert c["layout"] == {"replicas": 2, "tp": 2, "pp": 1} and c["itl_s"] > 0 and c["fits"]
    search = dtrain.plan(TINY, {"serve": True, "cluster": "h100-node", "search": True, "prompt": 32, "output": 16,
                                "itl_target_s": 0.05, "top": 2})
    best = search["serve_search"]["best"]
    assert len(best) == 2 and best[0]["tokens_per_s"] >= best[1]["tokens_per_s"]


def test_serving_refuses_training_keys_by_name():
    with pytest.raises(dtrain.InvalidArgumentError, match="zero"):
        dtrain.plan(TINY, {"serve": True, "cluster": "h100-node", "zero": 1})
    with pytest.raises(dtrain.InvalidArgumentError, match="serve"):
        dtrain.plan(TINY, {"cluster": "h100-node", "prompt": 8})
