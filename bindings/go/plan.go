package dtrain

import "dtrain.dev/dtrain/internal/cdt"

// PlanJSON returns the layout planner's report (dt_plan_json) as JSON, without building
// the model: config holds NewGPT's keys, plan the layout's ("dp", "tp", "pp",
// "micro_batch", "seq_len", "accumulation", "sequence_parallel", "pp_schedule",
// "virtual_stages", ...). With "cluster" (a built-in name such as "h100-node" or
// "h100-node:16", or a cluster's JSON text, e.g. CalibrateClusterJSON's) the report gains
// "cost" (per rank "memory" and "peak_bytes", "step_s", "tokens_per_s", "mfu", "time",
// "fits"), read with "zero", "recompute" and "in_process"; "search": true instead returns
// {"search": ...}, the "top" fastest layouts of the cluster's devices for "global_batch"
// sequences. An unknown cluster name is ErrNotFound, its message naming the built-in ones.
func PlanJSON(config, plan Options) (string, error) {
	c, freeConfig, err := newOptions(config)
	if err != nil {
		return "", err
	}
	defer freeConfig()
	p, freePlan, err := newOptions(plan)
	if err != nil {
		return "", err
	}
	defer freePlan()
	return readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_plan_json(c, p, buf, needed)
	})
}

// CalibrateClusterJSON measures this machine as a cluster for PlanJSON's "cluster"
// (dt_cluster_calibrate_json): GEMM, attention and elementwise rates on one core and on
// all of them, and the local backend's all-reduce latency and bandwidth, as JSON. It takes
// a few seconds and times the cores: run it with nothing else heavy going on.
func CalibrateClusterJSON() (string, error) {
	// A first buffer that holds a cluster's JSON: the cores are timed once, not twice.
	return readJSONFrom(65536, func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_cluster_calibrate_json(0, buf, needed)
	})
}

// MedianClusterJSON is the field-by-field median of several calibrations of one machine
// (dt_cluster_median_json): clusters is a JSON array of clusters (CalibrateClusterJSON's);
// each rate, fitted figure and link figure is their median. On a shared host single
// calibrations' fitted figures differ by 10-20%.
func MedianClusterJSON(clusters string) (string, error) {
	return readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_cluster_median_json(clusters, buf, needed)
	})
}
