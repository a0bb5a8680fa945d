//! Generation as an iterator, and loaders as iterators: leaving a stream early stops the
//! generation and leaks nothing.
mod common;

use common::*;
use dtrain::{Result, Status};

fn prompt() -> Vec<i32> {
    "123+456=".bytes().map(i32::from).collect()
}

#[test]
fn a_stream_yields_what_generate_returns() {
    let mut s = setup();
    s.step();
    let opts = [("max_new_tokens", 5.into())];
    let streamed: Vec<i32> = s
        .engine
        .stream(&prompt(), &opts)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let generated = s.engine.generate(&[prompt()], &opts).unwrap();
    assert_eq!(streamed, generated[0]);
    assert_eq!(streamed.len(), 5);
}

#[test]
fn a_stream_cancelled_from_another_thread_ends_with_cancelled() {
    // A long generation on a bigger model: the cancel lands long before it could end.
    let (mut engine, _, _) = big_engine();
    let mut stream = engine
        .stream(&prompt(), &[("max_new_tokens", 100.into())])
        .unwrap();
    let first = stream.next().unwrap().unwrap();
    assert!((0..256).contains(&first));
    let token = stream.cancel_token();
    std::thread::spawn(move || token.cancel()).join().unwrap();
    // Tokens made before the cancel landed may still come; then the CANCELLED end.
    let rest: Vec<Result<i32>> = stream.by_ref().collect();
    assert!(
        rest.len() < 99,
        "{} tokens after the cancel",
        rest.len() - 1
    );
    let last = rest.last().expect("an end item");
    assert_eq!(last.as_ref().unwrap_err().status, Status::CANCELLED);
    assert!(stream.next().is_none());
}

#[test]
fn library_errors_end_the_stream() {
    let mut s = setup();
    let items: Vec<Result<i32>> = s
        .engine
        .stream(&prompt(), &[("temprature", 1.0.into())])
        .unwrap()
        .collect();
    assert_eq!(items.len(), 1, "{items:?}");
    let err = items[0].as_ref().unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("temprature"), "{err}");
    let empty = s.engine.stream(&[], &[]).unwrap().collect::<Vec<_>>();
    assert!(empty[0].is_err());
    // A huge capacity is capped and then refused by the library, never a panic.
    let huge = s
        .engine
        .stream(&prompt(), &[("max_new_tokens", i64::MAX.into())])
        .unwrap()
        .collect::<Vec<_>>();
    assert_eq!(
        huge[0].as_ref().unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
}

#[test]
fn a_leaked_stream_cannot_outlive_the_engine_unsafely() {
    let mut s = setup();
    // Forgetting the stream skips its Drop: the worker owns the engine until it finishes,
    // and later calls wait for it on the shared lock.
    std::mem::forget(
        s.engine
            .stream(&prompt(), &[("max_new_tokens", 4.into())])
            .unwrap(),
    );
    assert!(s.step().is_finite());
    s.engine.close();
}

#[test]
fn a_loader_is_an_iterator_of_batches() {
    let data = addition();
    let mut by_hand = loader(&data);
    let (mut x, mut y) = batch_tensors(&data);
    let iterated = loader(&data);
    assert_eq!(iterated.batch_shape(), [16, data.context().unwrap() as i64]);
    for batch in iterated.take(3) {
        let (bx, by) = batch.unwrap();
        by_hand.next_into(&mut x, &mut y).unwrap();
        assert_eq!(bx.to_vec::<i32>().unwrap(), x.to_vec::<i32>().unwrap());
        assert_eq!(by.to_vec::<i32>().unwrap(), y.to_vec::<i32>().unwrap());
    }
    // It goes on past an epoch (a new permutation each time).
    let mut l = loader(&data);
    let per_epoch = l.batches_per_epoch().unwrap() as usize;
    assert_eq!(
        l.by_ref().take(per_epoch + 1).filter(|b| b.is_ok()).count(),
        per_epoch + 1
    );
    assert_eq!(l.position().unwrap(), (1, 1));
    // A closed loader yields errors, not a panic.
    l.close();
    assert_eq!(
        l.next().unwrap().unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
}
