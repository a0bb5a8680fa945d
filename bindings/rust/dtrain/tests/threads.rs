//! Handles move between threads (Send) and are not shared (not Sync).
mod common;

use common::*;

fn assert_send<T: Send>() {}

#[test]
fn handles_are_send() {
    assert_send::<dtrain::Tensor>();
    assert_send::<dtrain::Mesh>();
    assert_send::<dtrain::Model>();
    assert_send::<dtrain::Optimizer>();
    assert_send::<dtrain::Engine>();
    assert_send::<dtrain::Dataset>();
    assert_send::<dtrain::Loader>();
    assert_send::<dtrain::Options>();
    assert_send::<dtrain::Error>();
    assert_send::<dtrain::CancelToken>();
    assert_send::<dtrain::MeshAbortHandle>();
    assert_send::<dtrain::TokenStream<'static>>();
}

#[test]
fn train_on_another_thread_while_this_one_reads_the_model() {
    let mut s = setup();
    let model = std::mem::replace(&mut s.model, gpt_tiny());
    let worker = std::thread::spawn(move || (0..4).map(|_| s.step()).collect::<Vec<f64>>());
    // The model's handle is used here while the engine trains it there: the shared family
    // lock serializes the two.
    let names = model.param_names().unwrap();
    for _ in 0..20 {
        let w = model.param(&names[0]).unwrap();
        assert!(w.to_vec::<f32>().unwrap().iter().all(|v| v.is_finite()));
    }
    let losses = worker.join().unwrap();
    assert!(losses.iter().all(|l| l.is_finite()));
}

#[test]
fn a_dataset_is_shared_by_reference_across_threads() {
    let data = addition();
    std::thread::scope(|sc| {
        let a = sc.spawn(|| data.example(0).unwrap());
        let b = sc.spawn(|| data.example(0).unwrap());
        assert_eq!(a.join().unwrap(), b.join().unwrap());
    });
}
