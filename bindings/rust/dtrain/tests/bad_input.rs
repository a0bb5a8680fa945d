//! Wrong slices, closed handles and missing handles are errors, never crashes.
mod common;

use common::*;
use dtrain::{DType, Engine, Loader, Mesh, Optimizer, ReduceOp, Status, Tensor};

#[test]
fn wrong_host_dtype_is_refused() {
    let mut t = Tensor::new(DType::F32, &[2, 3]).unwrap();
    let err = t.copy_from(&[1i32; 6]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(
        err.message.contains("f32") && err.message.contains("i32"),
        "{err}"
    );
    let mut out = [0i64; 6];
    assert_eq!(
        t.copy_to(&mut out).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
    assert!(t.to_vec::<i32>().is_err());
}

#[test]
fn wrong_host_length_is_refused() {
    let mut t = Tensor::new(DType::F32, &[2, 3]).unwrap();
    let err = t.copy_from(&[1.0f32; 5]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(
        err.message.contains('6') && err.message.contains('5'),
        "{err}"
    );
    let mut out = vec![0f32; 7];
    assert!(t.copy_to(&mut out).is_err());
    assert!(t.copy_from_bytes(&[0u8; 23]).is_err());
    // Nothing was written.
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 6]);
}

#[test]
fn bad_shapes_and_dtypes_from_the_library() {
    let err = Tensor::new(DType::F32, &[2, -1]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("shape"), "{err}");
    let err = Tensor::new(DType::F32, &[1; 9]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    let err = Tensor::on_device(DType::F32, &[2], "tpu:0", &[]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
}

#[test]
fn a_closed_handle_used_again_is_an_error() {
    let mut t = Tensor::new(DType::F32, &[2]).unwrap();
    t.close();
    for err in [
        t.numel().unwrap_err(),
        t.shape().unwrap_err(),
        t.copy_from(&[1.0f32, 2.0]).unwrap_err(),
        t.piece(0).unwrap_err(),
    ] {
        assert_eq!(err.status, Status::INVALID_ARGUMENT);
        assert!(err.message.contains("closed"), "{err}");
    }

    let mut s = setup();
    s.engine.close();
    let err = s.engine.train_step(&s.inputs, &s.targets).unwrap_err();
    assert!(
        err.message.contains("Engine") && err.message.contains("closed"),
        "{err}"
    );
    assert!(s.engine.save(scratch("closed").join("x")).is_err());
    assert!(s.engine.generate(&[[49, 43]], &[]).is_err());

    s.loader.close();
    assert!(s.loader.next(&mut s.inputs, &mut s.targets).is_err());
    s.dataset.close();
    assert!(s.dataset.context().is_err());
    assert!(Loader::new(&s.dataset, &[("batch", 4.into())]).is_err());
    s.mesh.close();
    assert!(s.mesh.world_size().is_err());
    assert!(s.mesh.tensor(DType::F32, &[2]).is_err());
}

#[test]
fn a_closed_handle_where_one_is_required() {
    // Rust has no null handles; a closed one is the nearest thing, and it is refused.
    let mut model = gpt_tiny();
    let opt = adamw(&model);
    model.close();
    let err = Optimizer::new(&model, "adamw", &[]).unwrap_err();
    assert!(err.message.contains("Model"), "{err}");
    let err = Engine::new(None, &model, &opt, &[]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);

    let model = gpt_tiny();
    let opt = adamw(&model);
    let mut mesh = Mesh::new("local", 2, &[]).unwrap();
    mesh.close();
    assert!(Engine::new(Some(&mesh), &model, &opt, &[])
        .unwrap_err()
        .message
        .contains("Mesh"));
    // No mesh at all is allowed (this process alone).
    assert!(Engine::new(None, &model, &opt, &[]).is_ok());

    let mut t = Tensor::new(DType::I32, &[16, 4]).unwrap();
    let live = Tensor::new(DType::I32, &[16, 4]).unwrap();
    t.close();
    let mut e = Engine::new(None, &model, &opt, &[]).unwrap();
    assert!(e.train_step(&t, &live).is_err());
    assert!(e.train_step(&live, &t).is_err());
}

#[test]
fn mismatched_handles_are_library_errors() {
    // An optimizer over another model.
    let a = gpt_tiny();
    let b = gpt_tiny();
    let opt_b = adamw(&b);
    assert_eq!(
        Engine::new(None, &a, &opt_b, &[]).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );

    // A plain tensor in a collective; a piece index out of range.
    let mesh = Mesh::new("local", 2, &[]).unwrap();
    let mut plain = Tensor::new(DType::F32, &[4]).unwrap();
    assert!(mesh.all_reduce("world", &mut plain, ReduceOp::Sum).is_err());
    let x = mesh.tensor(DType::F32, &[4]).unwrap();
    assert!(x.piece(2).is_err());
    // A host copy into a tensor of two pieces.
    let mut x = x;
    assert!(x.copy_from(&[0f32; 4]).is_err());

    // Batches of the wrong dtype or shape.
    let mut s = setup();
    let f = Tensor::new(DType::F32, &[16, 4]).unwrap();
    assert!(s.engine.train_step(&f, &f).is_err());
    let mut small = Tensor::new(DType::I32, &[3, 2]).unwrap();
    let mut small2 = Tensor::new(DType::I32, &[3, 2]).unwrap();
    assert!(s.loader.next(&mut small, &mut small2).is_err());
    // The engine still works after all that.
    assert!(s.step().is_finite());
}

#[test]
fn generate_argument_errors() {
    let mut s = setup();
    let none: [&[i32]; 0] = [];
    assert!(s.engine.generate(&none, &[]).is_err());
    let empty: [&[i32]; 1] = [&[]];
    assert!(s.engine.generate(&empty, &[]).is_err());
    let err = s
        .engine
        .generate(&[[1, 2, 3]], &[("max_new_tokens", 10_000.into())])
        .unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    // Huge values are refused by the library, not a panic ("capacity overflow") here.
    for huge in [i64::MAX, 1 << 40, i64::from(i32::MAX)] {
        let err = s
            .engine
            .generate(&[[1, 2, 3]], &[("max_new_tokens", huge.into())])
            .unwrap_err();
        assert_eq!(err.status, Status::INVALID_ARGUMENT, "{huge}: {err}");
    }
    let err = s
        .engine
        .generate(&[[1, 2, 3]], &[("max_new_tokens", "five".into())])
        .unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    let err = s
        .engine
        .generate(&[[1, 2, 3]], &[("temprature", 1.0.into())])
        .unwrap_err();
    assert!(err.message.contains("temprature"), "{err}");
}
