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
