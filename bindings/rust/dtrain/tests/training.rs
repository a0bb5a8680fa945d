//! The sample's configuration trains; a saved and reloaded run continues exactly.
mod common;

use common::*;
use dtrain::{checkpoint_info_json, Engine, Model};

#[test]
fn loss_is_finite_and_decreases() {
    let mut s = setup();
    let losses: Vec<f64> = (0..8).map(|_| s.step()).collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    // Byte vocab: an untrained model starts near ln(256).
    assert!((losses[0] - 256f64.ln()).abs() < 0.5, "{losses:?}");
    assert!(losses[7] < losses[0] - 0.5, "{losses:?}");
    assert_eq!(s.engine.step().unwrap(), 8);
    let stats = s.engine.last_stats_json().unwrap();
    assert!(
        stats.contains("\"step\"") && stats.contains("\"loss\""),
        "{stats}"
    );
    let eval = s.engine.eval(&s.inputs, &s.targets).unwrap();
    assert!(eval.is_finite());
}

#[test]
fn save_then_load_continues_like_an_unbroken_run() {
    let stem = scratch("resume").join("ckpt").join("gpt");

    // The unbroken run: 3 steps, save, 2 more.
    let mut a = setup();
    for _ in 0..3 {
        a.step();
    }
    a.engine.save(&stem).unwrap();
    let expected = [a.step(), a.step()];

    let info = checkpoint_info_json(&stem).unwrap();
    assert!(
        info.contains("\"step\":3") || info.contains("\"step\": 3"),
        "{info}"
    );

    // A fresh process state: the model rebuilt from the checkpoint, a new optimizer and
    // engine, the checkpoint loaded, the loader moved past the 3 batches already used.
    let mesh = dtrain::Mesh::new("local", 2, &[]).unwrap();
    let model = Model::from_checkpoint(&stem).unwrap();
    assert_eq!(model.param_count().unwrap(), a.model.param_count().unwrap());
    let opt = adamw(&model);
    let mut engine = Engine::new(Some(&mesh), &model, &opt, &[]).unwrap();
    engine.load(&stem).unwrap();
    assert_eq!(engine.step().unwrap(), 3);
    let data = addition();
    let mut loader = loader(&data);
    let per_epoch = loader.batches_per_epoch().unwrap();
    assert!(per_epoch > 3);
    loader.seek(0, 3).unwrap();
    assert_eq!(loader.position().unwrap(), (0, 3));
    let (mut x, mut y) = batch_tensors(&data);
    let mut got = [0f64; 2];
    for l in got.iter_mut() {
        loader.next_into(&mut x, &mut y).unwrap();
        *l = engine.train_step(&x, &y).unwrap();
    }
    assert_eq!(got, expected, "resumed losses differ from the unbroken run");
}

#[test]
fn generate_and_stream_agree() {
    let mut s = setup();
    for _ in 0..3 {
        s.step();
    }
    let prompts: Vec<Vec<i32>> = ["123+456=", "9+9="]
        .iter()
        .map(|p| p.bytes().map(i32::from).collect())
        .collect();
    let opts = [("max_new_tokens", 5.into())];
    let out = s.engine.generate(&prompts, &opts).unwrap();
    assert_eq!(out.len(), 2);
    assert!(
        out.iter()
            .all(|r| r.len() == 5 && r.iter().all(|&t| (0..256).contains(&t))),
        "{out:?}"
    );
    let mut streamed = vec![Vec::new(), Vec::new()];
    let again = s
        .engine
        .generate_stream(&prompts, &opts, |p, t| streamed[p].push(t))
        .unwrap();
    assert_eq!(again, out);
    assert_eq!(streamed, out);
    assert!(s
        .engine
        .last_generate_stats_json()
        .unwrap()
        .contains("new_tokens"));
    // Greedy generation is deterministic and changes nothing.
    assert_eq!(s.engine.generate(&prompts, &opts).unwrap(), out);
}

#[test]
#[should_panic(expected = "callback panicked")]
fn a_panic_in_the_token_callback_is_raised_after_generate() {
    let mut s = setup();
    let _ = s.engine.generate_stream(
        &[[49, 43, 49, 61]],
        &[("max_new_tokens", 3.into())],
        |_, _| panic!("callback panicked"),
    );
}

#[test]
fn model_parameters() {
    let model = gpt_tiny();
    let names = model.param_names().unwrap();
    assert_eq!(names.len(), model.param_tensor_count().unwrap());
    assert!(names.iter().any(|n| n == "wte.weight"), "{names:?}");
    let total: usize = names
        .iter()
        .map(|n| model.param(n).unwrap().numel().unwrap())
        .sum();
    assert_eq!(total, model.param_count().unwrap());
    assert_eq!(
        Model::gpt_param_count(&[("preset", "gpt-tiny".into())]).unwrap(),
        total
    );
    assert_eq!(
        Model::gpt_param_count(&[("n_layer", (-1i64).into())])
            .unwrap_err()
            .status,
        dtrain::Status::INVALID_ARGUMENT
    );
    assert_eq!(
        model.param("no.such.param").unwrap_err().status,
        dtrain::Status::NOT_FOUND
    );
}

#[test]
fn host_driven_loop_on_a_sequential_model() {
    let mut model = Model::sequential(&[
        ("layers", "linear:2:8,gelu,linear:8:1".into()),
        ("seed", 3.into()),
    ])
    .unwrap();
    let mut opt = dtrain::Optimizer::new(&model, "sgd", &[("lr", 0.1.into())]).unwrap();
    let x =
        dtrain::Tensor::from_slice(&[4, 2], &[0.0f32, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]).unwrap();
    let y = dtrain::Tensor::from_slice(&[4, 1], &[0.0f32, 1.0, 1.0, 2.0]).unwrap();
    let mut losses = Vec::new();
    for _ in 0..30 {
        model.zero_grad().unwrap();
        let pred = model.forward(&x).unwrap();
        let (l, dpred) = dtrain::loss("mse", &pred, &y).unwrap();
        model.backward_params(&dpred).unwrap();
        opt.step().unwrap();
        losses.push(l);
    }
    assert!(losses[29] < losses[0] * 0.5, "{losses:?}");
}
