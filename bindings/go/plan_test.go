package dtrain_test

import (
	"encoding/json"
	"testing"

	"dtrain.dev/dtrain"
)

// The layout planner: a costed plan, a search of a cluster's layouts, an unknown cluster.
func TestPlanJSON(t *testing.T) {
	defer guard(t)
	tiny := dtrain.Options{"n_layer": 2, "d_model": 64, "n_head": 2, "vocab_size": 256, "context": 64}

	var plan struct {
		Cost struct {
			StepS float64 `json:"step_s"`
			Ranks []struct {
				PeakBytes float64 `json:"peak_bytes"`
			} `json:"ranks"`
		} `json:"cost"`
	}
	text := must(dtrain.PlanJSON(tiny, dtrain.Options{"dp": 2, "zero": 1, "cluster": "cpu-default"}))
	ok(t, json.Unmarshal([]byte(text), &plan))
	if plan.Cost.StepS <= 0 || len(plan.Cost.Ranks) == 0 || plan.Cost.Ranks[0].PeakBytes <= 0 {
		t.Fatalf("plan's cost %+v", plan.Cost)
	}

	var search struct {
		Search struct {
			Best []json.RawMessage `json:"best"`
		} `json:"search"`
	}
	text = must(dtrain.PlanJSON(tiny, dtrain.Options{"cluster": "h100-node", "search": true, "global_batch": 16}))
	ok(t, json.Unmarshal([]byte(text), &search))
	if len(search.Search.Best) == 0 {
		t.Fatalf("search found no layout: %s", text)
	}

	_, err := dtrain.PlanJSON(tiny, dtrain.Options{"cluster": "no-such-cluster"})
	wantErr(t, err, dtrain.ErrNotFound, "no-such-cluster", "cpu-default")
}

// Several calibrations of one machine: each figure's median; a bad cluster is named.
func TestMedianClusterJSON(t *testing.T) {
	defer guard(t)
	cluster := func(eff string) string {
		return `{"name": "m", "devices_per_host": 2, "device_memory": 1e9, "matmul_flops_f32": 1e11,
			"matmul_flops_16": 1e11, "attention_flops_f32": 1e10, "attention_flops_16": 1e10,
			"memory_bandwidth": 1e10, "compute_efficiency": ` + eff + `, "intra": {"bandwidth": 1e9, "latency": 1e-6}}`
	}
	var m struct {
		Efficiency float64 `json:"compute_efficiency"`
	}
	text := must(dtrain.MedianClusterJSON("[" + cluster("0.9") + "," + cluster("1.2") + "," + cluster("1.0") + "]"))
	ok(t, json.Unmarshal([]byte(text), &m))
	if m.Efficiency != 1.0 {
		t.Fatalf("median efficiency %v: %s", m.Efficiency, text)
	}
	_, err := dtrain.MedianClusterJSON("[" + cluster("1.0") + `, {"name": 3}]`)
	wantErr(t, err, dtrain.ErrInvalidArgument, "clusters[1]")
}
