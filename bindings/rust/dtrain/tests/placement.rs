//! The mesh's last two axes from Rust: expert parallelism (mixtral-tiny's experts over ep 2,
//! each rank routing its 8 rows) and context parallelism (gpt-tiny's 12-token examples in 4
//! chunks over cp 2, ring attention) give dp 2's losses on the same batches.
mod common;

use common::*;
use dtrain::{Engine, Mesh, Model};

fn losses(preset: &str, axis: &str) -> Vec<f64> {
    let mesh = Mesh::new("local", 2, &[(axis, 2.into())]).unwrap();
    let model = Model::gpt(&[("preset", preset.into()), ("seed", 1.into())]).unwrap();
    let opt = adamw(&model);
    let mut engine = Engine::new(Some(&mesh), &model, &opt, &[]).unwrap();
    let data = addition();
    let mut loader = loader(&data);
    let (mut x, mut y) = batch_tensors(&data);
    (0..3)
        .map(|_| {
            loader.next_into(&mut x, &mut y).unwrap();
            engine.train_step(&x, &y).unwrap()
        })
        .collect()
}

fn expect_same_losses(preset: &str, axis: &str) {
    let dp = losses(preset, "dp");
    let other = losses(preset, axis);
    for (a, b) in dp.iter().zip(&other) {
        assert!(
            (a - b).abs() <= 1e-5 * a.abs(),
            "{axis} 2: {other:?}, dp 2: {dp:?}"
        );
    }
}

#[test]
fn expert_parallel_matches_data_parallel() {
    expect_same_losses("mixtral-tiny", "ep");
}

#[test]
fn context_parallel_matches_data_parallel() {
    expect_same_losses("gpt-tiny", "cp");
}
