//! The layout planner: a costed plan, a search of a cluster's layouts, an unknown cluster.
use dtrain::{median_cluster_json, plan_json, Status, Value};

/// A GPT the size of the "gpt-tiny" preset, by its keys.
fn tiny() -> [(&'static str, Value); 5] {
    [
        ("n_layer", 2.into()),
        ("d_model", 64.into()),
        ("n_head", 2.into()),
        ("vocab_size", 256.into()),
        ("context", 64.into()),
    ]
}

/// The number after the first `"key":` that follows `after` in a compact JSON report.
fn number_after(json: &str, after: &str, key: &str) -> f64 {
    let from = json
        .find(after)
        .unwrap_or_else(|| panic!("{after} in {json}"))
        + after.len();
    let pattern = format!("\"{key}\":");
    let at = json[from..]
        .find(&pattern)
        .unwrap_or_else(|| panic!("{key} after {after} in {json}"));
    let rest = &json[from + at + pattern.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    rest[..end].parse().unwrap()
}

#[test]
fn plan_with_a_cluster_costs_the_step_and_each_rank() {
    let plan = [
        ("dp", 2.into()),
        ("zero", 1.into()),
        ("cluster", "cpu-default".into()),
    ];
    let json = plan_json(&tiny(), &plan).unwrap();
    assert!(number_after(&json, "\"cost\":", "step_s") > 0.0, "{json}");
    assert!(
        number_after(&json, "\"ranks\":[", "peak_bytes") > 0.0,
        "{json}"
    );
}

#[test]
fn search_finds_the_fastest_layouts() {
    let plan = [
        ("cluster", "h100-node".into()),
        ("search", true.into()),
        ("global_batch", 16.into()),
    ];
    let json = plan_json(&tiny(), &plan).unwrap();
    let best = json.find("\"best\":[").expect("search.best") + "\"best\":[".len();
    assert!(json.starts_with("{\"search\":"), "{json}");
    assert!(
        json[best..].starts_with('{'),
        "an empty search.best: {json}"
    );
}

#[test]
fn unknown_cluster_is_not_found_naming_the_built_in_ones() {
    let err = plan_json(&tiny(), &[("cluster", "no-such-cluster".into())]).unwrap_err();
    assert_eq!(err.status, Status::NOT_FOUND);
    assert!(err.message.contains("cpu-default"), "{err}");
}

#[test]
fn median_of_clusters_and_a_bad_one_named() {
    let one = |eff: f64| {
        format!(
            "{{\"name\": \"m\", \"devices_per_host\": 2, \"device_memory\": 1e9, \"matmul_flops_f32\": 1e11, \
             \"matmul_flops_16\": 1e11, \"attention_flops_f32\": 1e10, \"attention_flops_16\": 1e10, \
             \"memory_bandwidth\": 1e10, \"compute_efficiency\": {eff}, \"intra\": {{\"bandwidth\": 1e9, \
             \"latency\": 1e-6}}}}"
        )
    };
    let json = median_cluster_json(&format!("[{}, {}, {}]", one(0.9), one(1.2), one(1.0))).unwrap();
    assert!(json.contains("\"compute_efficiency\": 1.0"), "{json}");
    let err = median_cluster_json(&format!("[{}, {{\"name\": 3}}]", one(1.0))).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("clusters[1]"), "{err}");
}
