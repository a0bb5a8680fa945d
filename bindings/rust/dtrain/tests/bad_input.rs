//! Wrong slices, closed handles and missing handles are errors, never crashes.
mod common;

use common::*;
use dtrain::{DType, Engine, Loader, Mesh, Model, Optimizer, ReduceOp, Status, Tensor};

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
    assert!(s.loader.next_into(&mut s.inputs, &mut s.targets).is_err());
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
    let mut x = mesh.tensor(DType::F32, &[4]).unwrap();
    assert!(x.piece(2).is_err());
    // A host copy into a tensor of two pieces.
    assert!(x.copy_from(&[0f32; 4]).is_err());

    // Batches of the wrong dtype or shape.
    let mut s = setup();
    let f = Tensor::new(DType::F32, &[16, 4]).unwrap();
    assert!(s.engine.train_step(&f, &f).is_err());
    let mut small = Tensor::new(DType::I32, &[3, 2]).unwrap();
    let mut small2 = Tensor::new(DType::I32, &[3, 2]).unwrap();
    assert!(s.loader.next_into(&mut small, &mut small2).is_err());
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

/// Every public call fed the extreme values of its size and index arguments: an `Err`
/// (or, where the value is legal, an answer), never a panic or an abort.
#[test]
fn extreme_values_are_errors_not_panics() {
    let huge_shapes: [&[i64]; 6] = [
        &[i64::MAX],
        &[i64::MIN],
        &[i64::MAX, i64::MAX],
        &[1 << 40, 1 << 40],
        &[1 << 40],
        &[2; 64],
    ];
    for shape in huge_shapes {
        assert!(Tensor::new(DType::F32, shape).is_err(), "{shape:?}");
        assert!(Tensor::from_slice(shape, &[1.0f32]).is_err(), "{shape:?}");
        assert!(Tensor::from_vec(vec![1i64], shape).is_err(), "{shape:?}");
    }
    assert!(Tensor::new(DType::F32, &[0, i64::MAX]).is_err());

    let mut t = Tensor::new(DType::F32, &[4]).unwrap();
    assert!(t.piece(usize::MAX).is_err());
    assert!(t.piece(i32::MAX as usize + 1).is_err());
    for offset in [i64::MIN, i64::MAX] {
        let _ = t.fill_normal(u64::MAX, "x", offset, f32::MAX, f32::INFINITY);
        let _ = t.fill_uniform(0, "x", offset, f32::NAN, f32::NEG_INFINITY);
    }

    for size in [i32::MIN, -1, 0, 1025, i32::MAX] {
        assert!(Mesh::new("local", size, &[]).is_err(), "{size}");
    }
    assert!(Mesh::new("local", 2, &[("timeout_ms", i64::MIN.into())]).is_err());
    let mesh = Mesh::new("local", 2, &[]).unwrap();
    for i in [i32::MIN, -1, 2, i32::MAX] {
        assert!(mesh.local_rank(i).is_err(), "{i}");
        assert!(mesh.coord(i, "world").is_err(), "{i}");
        assert!(mesh.comm_stats(i, "world", "all_reduce").is_err(), "{i}");
        assert!(
            mesh.comm_wire_bytes(i, "world", "all_reduce").is_err(),
            "{i}"
        );
    }
    assert!(mesh.tensor(DType::F32, &[i64::MAX]).is_err());
    let mut x = mesh.tensor(DType::F32, &[4]).unwrap();
    let mut y = mesh.tensor(DType::F32, &[4]).unwrap();
    for root in [i32::MIN, 2, i32::MAX] {
        assert!(mesh.broadcast("world", &mut x, root).is_err(), "{root}");
        assert!(mesh
            .reduce("world", &x, &mut y, ReduceOp::Sum, root)
            .is_err());
    }

    for (key, v) in [
        ("n_layer", i64::MAX),
        ("d_model", i64::MAX),
        ("vocab_size", i64::MIN),
        ("context", 1 << 62),
    ] {
        assert!(Model::gpt(&[(key, v.into())]).is_err(), "{key}");
        assert!(Model::gpt_param_count(&[(key, v.into())]).is_err(), "{key}");
    }
    // Legal sizes whose parameter count is enormous: counted, not allocated.
    let big = [
        ("n_layer", 4096.into()),
        ("d_model", 65536.into()),
        ("n_head", 1.into()),
    ];
    if let Ok(n) = Model::gpt_param_count(&big) {
        assert!(n > 1 << 40, "{n}");
    }
    assert!(Model::mlp(&[("sizes", "99999999999999999999,1".into())]).is_err());
    assert!(Model::sequential(&[("layers", "linear:9223372036854775807:1".into())]).is_err());

    let data = addition();
    assert!(data.example(usize::MAX).is_err());
    assert!(data.example(data.size().unwrap()).is_err());
    assert!(Loader::new(&data, &[("batch", i64::MAX.into())]).is_err());
    assert!(Loader::new(&data, &[("batch", i64::MIN.into())]).is_err());
    let mut loader = loader(&data);
    for (e, b) in [(i64::MIN, 0), (0, i64::MIN), (0, i64::MAX), (i64::MAX, 0)] {
        assert!(loader.seek(e, b).is_err(), "{e} {b}");
    }
    // The last epoch seek accepts (2^62): the loader counts on from it without overflow.
    let last = loader.batches_per_epoch().unwrap() - 1;
    loader.seek(1 << 62, last).unwrap();
    for batch in loader.by_ref().take(2) {
        batch.unwrap();
    }
    assert_eq!(loader.position().unwrap(), ((1 << 62) + 1, 1));

    assert!(dtrain::configure(&[("threads", i64::MIN.into())]).is_err());
    for rank in [i32::MIN, i32::MAX] {
        let _ = dtrain::memory_rank_stats("cpu", rank, dtrain::MemTag::All);
    }
    assert!(Tensor::on_device(DType::F32, &[2], "cuda:2147483648", &[]).is_err());
    assert!(dtrain::device_count("").is_err());

    let mut s = setup();
    assert!(s.optimizer.set_lr(f64::NAN).is_err() || s.optimizer.set_lr(0.003).is_ok());
    // Accepted or not at creation, such an engine cannot step on a batch of 16.
    if let Ok(mut e) = Engine::new(
        None,
        &s.model,
        &s.optimizer,
        &[("micro_batches", i64::MAX.into())],
    ) {
        assert!(e.train_step(&s.inputs, &s.targets).is_err());
    }
    for (key, v) in [
        ("max_new_tokens", i64::MIN),
        ("max_new_tokens", -1),
        ("top_k", i64::MIN),
        ("stop_token", i64::MAX),
        ("seed", i64::MIN),
    ] {
        // Some of these are legal (a seed, an unreachable stop token): no panic is the point.
        let _ = s.engine.generate(&[[1, 2, 3]], &[(key, v.into())]);
        let _ = s
            .engine
            .stream(&[1, 2, 3], &[(key, v.into())])
            .map(|st| st.count());
    }
    // More prompts than an i32 counts, or than usize can multiply by the capacity (a
    // zero-sized prompt type makes such slices free).
    struct Same;
    impl AsRef<[i32]> for Same {
        fn as_ref(&self) -> &[i32] {
            &[1, 2, 3]
        }
    }
    for n in [usize::MAX, i32::MAX as usize + 1] {
        // SAFETY: a slice of a zero-sized type may have any length at a dangling address
        // (vec![Same; n] would clone n times).
        let many: &[Same] =
            unsafe { std::slice::from_raw_parts(std::ptr::NonNull::dangling().as_ptr(), n) };
        assert_eq!(
            s.engine.generate(many, &[]).unwrap_err().status,
            Status::INVALID_ARGUMENT,
            "{n}"
        );
    }
    assert!(s.step().is_finite());
}

#[test]
fn extreme_server_values_are_errors_not_panics() {
    let model = gpt_tiny();
    for (key, v) in [
        ("block_size", i64::MAX),
        ("kv_blocks", i64::MIN),
        ("max_num_seqs", i64::MAX),
        ("kv_cache_bytes", i64::MAX),
    ] {
        let _ = dtrain::Server::new(None, &model, &[(key, v.into())]);
    }
    let server = dtrain::Server::new(None, &model, &[("block_size", 16.into())]).unwrap();
    for (key, v) in [
        ("max_tokens", i64::MAX),
        ("max_tokens", i64::MIN),
        ("top_k", i64::MIN),
    ] {
        if let Ok(req) = server.submit(&[1, 2, 3], &[(key, v.into())]) {
            let _ = req.take(2).count();
        }
    }
    assert!(!server.cancel(i64::MIN).unwrap());
    assert!(!server.cancel(i64::MAX).unwrap());
    server.drain(std::time::Duration::MAX).unwrap();
}
