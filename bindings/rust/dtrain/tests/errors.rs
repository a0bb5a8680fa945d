//! Failures come back as `Err(Error { status, message })` with the library's message.
mod common;

use common::*;
use dtrain::{status_name, Dataset, Engine, Error, Mesh, Model, Options, Status};

#[test]
fn status_names() {
    assert_eq!(Status::OK.name(), "DT_OK");
    assert_eq!(Status::IO.name(), "DT_ERR_IO");
    assert_eq!(Status::INTERNAL.name(), "DT_ERR_INTERNAL");
    assert_eq!(status_name(7), "DT_ERR_TIMEOUT");
    assert_eq!(status_name(12345), "DT_ERR_UNKNOWN");
    assert_eq!(Status(5), Status::IO);
    assert!(dtrain::version().starts_with("0."));
    assert_eq!(dtrain::version_number(), dtrain::HEADER_VERSION_NUMBER);
}

#[test]
fn unknown_engine_option_names_the_key() {
    let model = gpt_tiny();
    let opt = adamw(&model);
    let err = Engine::new(None, &model, &opt, &[("no_such_engine_key", 1.into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("no_such_engine_key"), "{err}");
    // Display: "DT_ERR_INVALID_ARGUMENT: <message>", usable as a std error.
    let shown = err.to_string();
    assert!(shown.starts_with("DT_ERR_INVALID_ARGUMENT: "), "{shown}");
    let boxed: Box<dyn std::error::Error> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), shown);
}

#[test]
fn unknown_mesh_option_names_the_key() {
    let err = Mesh::new("local", 2, &[("bogus_axis", 2.into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("bogus_axis"), "{err}");
}

#[test]
fn bad_mesh_arguments() {
    let err = Mesh::new("no-such-backend", 2, &[]).unwrap_err();
    assert!(err.message.contains("no-such-backend"), "{err}");
    let err = Mesh::new("local", 4, &[("dp", 3.into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
}

#[test]
fn unknown_dataset_kind() {
    let err = Dataset::new("no_such_kind", &[]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("no_such_kind"), "{err}");
}

#[test]
fn missing_text_file_is_io() {
    let err = Dataset::new(
        "text",
        &[
            ("path", "/nonexistent/corpus.txt".into()),
            ("context", 8.into()),
        ],
    )
    .unwrap_err();
    assert!(
        err.status == Status::IO || err.status == Status::INVALID_ARGUMENT,
        "{err}"
    );
    assert!(err.message.contains("/nonexistent/corpus.txt"), "{err}");
}

#[test]
fn loading_a_missing_checkpoint_is_io() {
    let model = gpt_tiny();
    let opt = adamw(&model);
    let mut engine = Engine::new(None, &model, &opt, &[]).unwrap();
    let stem = scratch("missing").join("never-saved");
    let err = engine.load(&stem).unwrap_err();
    assert_eq!(err.status, Status::IO, "{err}");
    let err = Model::from_checkpoint(&stem).unwrap_err();
    assert_eq!(err.status, Status::IO, "{err}");
    // The engine is unchanged and usable.
    assert_eq!(engine.step().unwrap(), 0);
}

#[test]
fn bad_model_config() {
    let err = Model::gpt(&[("preset", "gpt-enormous".into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("gpt-enormous"), "{err}");
    // A value of the wrong type.
    let err = Model::gpt(&[("n_layer", "two".into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("n_layer"), "{err}");
}

#[test]
fn options_round_trip_and_errors() {
    let o = Options::from_pairs(&[
        ("i", 3.into()),
        ("d", 0.5.into()),
        ("b", true.into()),
        ("s", "text".into()),
        ("u", 7usize.into()),
    ])
    .unwrap();
    assert_eq!(o.len().unwrap(), 5);
    assert_eq!(o.get_int("i").unwrap(), 3);
    assert_eq!(o.get_double("i").unwrap(), 3.0);
    assert_eq!(o.get_double("d").unwrap(), 0.5);
    assert!(o.get_bool("b").unwrap());
    assert_eq!(o.get_string("s").unwrap(), "text");
    assert_eq!(o.get_int("missing").unwrap_err().status, Status::NOT_FOUND);
    let err = o.get_int("s").unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    // A NUL byte is refused before the call.
    let err: Error = Options::from_pairs(&[("a\0b", 1.into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
}

#[test]
fn errors_are_per_thread() {
    // Two threads fail differently at once; each sees its own message.
    let a = std::thread::spawn(|| {
        for _ in 0..50 {
            let err = Dataset::new("kind_from_thread_a", &[]).unwrap_err();
            assert!(err.message.contains("kind_from_thread_a"), "{err}");
        }
    });
    let b = std::thread::spawn(|| {
        for _ in 0..50 {
            let err = Mesh::new("local", 2, &[("key_from_thread_b", 1.into())]).unwrap_err();
            assert!(err.message.contains("key_from_thread_b"), "{err}");
        }
    });
    a.join().unwrap();
    b.join().unwrap();
}
