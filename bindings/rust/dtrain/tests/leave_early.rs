//! Leaving a stream early stops its generation and leaks nothing. Alone in its test binary:
//! the memory ledger counts the whole process, and other tests would allocate meanwhile.
mod common;

use common::big_engine;
use dtrain::{memory_stats, MemTag, Result};

fn prompt() -> Vec<i32> {
    "123+456=".bytes().map(i32::from).collect()
}

#[test]
fn leaving_a_stream_early_stops_it_and_the_ledger_returns_to_its_start() {
    // A model big enough that 100 new tokens take a while: leaving after 3 must cut it.
    let (mut engine, _, _) = big_engine();
    let full: Vec<i32> = engine
        .stream(&prompt(), &[("max_new_tokens", 5.into())])
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let stats = engine.last_generate_stats_json().unwrap();
    assert!(stats.contains("\"new_tokens\":5"), "{stats}");

    let start = memory_stats("cpu", MemTag::All).unwrap().current;
    let first: Vec<i32> = engine
        .stream(&prompt(), &[("max_new_tokens", 100.into())])
        .unwrap()
        .take(3)
        .collect::<Result<_>>()
        .unwrap();
    // take(3) dropped the stream: its generation was stopped and joined, and what it
    // allocated is freed.
    assert_eq!(first, full[..3]);
    assert_eq!(memory_stats("cpu", MemTag::All).unwrap().current, start);
    // It did not run to its end: the statistics are still the last finished generation's.
    assert_eq!(engine.last_generate_stats_json().unwrap(), stats);

    // The engine works on after it, and greedy generation is still what it was.
    let again: Vec<i32> = engine
        .stream(&prompt(), &[("max_new_tokens", 5.into())])
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(again, full);
}
