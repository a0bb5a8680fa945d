//! Cancelling a train step, an eval or a generation from another thread: the call returns
//! `Err(CANCELLED)` promptly, nothing changed, and the next call works.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;
use dtrain::{CancelToken, DType, Mesh, Status};

/// Raises `token` after `delay` on another thread; the handle returns when it did.
fn cancel_after(token: &CancelToken, delay: Duration) -> thread::JoinHandle<Instant> {
    let token = token.clone();
    thread::spawn(move || {
        thread::sleep(delay);
        let at = Instant::now();
        token.cancel();
        at
    })
}

#[test]
fn a_train_step_cancelled_midway_returns_promptly_and_changes_nothing() {
    let (mut engine, x, y) = big_engine();
    let started = Instant::now();
    engine.train_step(&x, &y).unwrap();
    let step_time = started.elapsed();
    assert_eq!(engine.step().unwrap(), 1);

    let token = CancelToken::new().unwrap();
    // About 200 ms in, or earlier on a machine fast enough to finish the step before that.
    let delay = Duration::from_millis(200).min(step_time / 4);
    let canceller = cancel_after(&token, delay);
    let err = engine.train_step_cancellable(&x, &y, &token).unwrap_err();
    let returned = Instant::now();
    let cancelled = canceller.join().unwrap();
    assert_eq!(err.status, Status::CANCELLED, "{err}");
    assert!(err.is_cancelled());
    let late = returned.saturating_duration_since(cancelled);
    eprintln!("cancelled {delay:?} into a {step_time:?} step; returned {late:?} after it");
    assert!(
        late < Duration::from_millis(100),
        "returned {late:?} after the cancel (an uncancelled step took {step_time:?})"
    );
    assert_eq!(
        engine.step().unwrap(),
        1,
        "a cancelled step changed the step count"
    );

    // A raised token fails the next call at once; reset, it lets the call run.
    assert!(token.is_cancelled());
    let err = engine.train_step_cancellable(&x, &y, &token).unwrap_err();
    assert!(err.is_cancelled());
    token.reset();
    let loss = engine.train_step_cancellable(&x, &y, &token).unwrap();
    assert!(loss.is_finite());
    assert_eq!(engine.step().unwrap(), 2);
    // The token is detached after each call: a later raise does not touch plain calls.
    token.cancel();
    engine.train_step(&x, &y).unwrap();
    assert_eq!(engine.step().unwrap(), 3);
}

#[test]
fn a_cancelled_step_leaves_the_same_losses_as_no_step() {
    // Two identical engines; one sees a cancelled step in between. Their next losses agree.
    let mut a = setup();
    let mut b = setup();
    a.step();
    b.step();
    let token = CancelToken::new().unwrap();
    token.cancel();
    assert!(b
        .engine
        .train_step_cancellable(&b.inputs, &b.targets, &token)
        .unwrap_err()
        .is_cancelled());
    assert_eq!(a.step(), b.step());
}

#[test]
fn eval_and_generate_can_be_cancelled() {
    let mut s = setup();
    let token = CancelToken::new().unwrap();
    token.cancel();
    let err = s
        .engine
        .eval_cancellable(&s.inputs, &s.targets, &token)
        .unwrap_err();
    assert_eq!(err.status, Status::CANCELLED);
    let err = s
        .engine
        .generate_cancellable(&[[49, 43, 49, 61]], &[("max_new_tokens", 3.into())], &token)
        .unwrap_err();
    assert_eq!(err.status, Status::CANCELLED);
    token.reset();
    let out = s
        .engine
        .generate_cancellable(&[[49, 43, 49, 61]], &[("max_new_tokens", 3.into())], &token)
        .unwrap();
    assert_eq!(out[0].len(), 3);
    assert!(s.engine.eval(&s.inputs, &s.targets).unwrap().is_finite());
}

#[test]
fn tokens_are_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<CancelToken>();
    assert_send_sync::<dtrain::MeshAbortHandle>();
    let token = CancelToken::new().unwrap();
    thread::scope(|sc| {
        sc.spawn(|| token.cancel());
    });
    assert!(token.is_cancelled());
}

#[test]
fn a_mesh_aborted_from_another_thread_fails_its_collectives() {
    let mesh = Mesh::new("local", 2, &[]).unwrap();
    let abort = mesh.abort_handle().unwrap();
    thread::spawn(move || abort.abort().unwrap())
        .join()
        .unwrap();
    let mut x = mesh.tensor(DType::F32, &[4]).unwrap();
    let err = mesh
        .all_reduce("world", &mut x, dtrain::ReduceOp::Sum)
        .unwrap_err();
    assert_eq!(err.status, Status::ABORTED, "{err}");
    // Abort is idempotent, and works on the mesh itself too.
    mesh.abort().unwrap();
    let mut closed = mesh;
    closed.close();
    assert_eq!(closed.abort().unwrap_err().status, Status::INVALID_ARGUMENT);
}
