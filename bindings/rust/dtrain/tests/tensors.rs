//! Tensors, mesh tensors and collectives, ops, memory stats.
use dtrain::{matmul, memory_stats, softmax, DType, MemTag, Mesh, ReduceOp, Tensor};

#[test]
fn create_copy_and_query() {
    let mut t = Tensor::new(DType::F32, &[2, 3]).unwrap();
    assert_eq!(t.dtype().unwrap(), DType::F32);
    assert_eq!(t.shape().unwrap(), vec![2, 3]);
    assert_eq!(t.ndim().unwrap(), 2);
    assert_eq!(t.numel().unwrap(), 6);
    assert_eq!(t.nbytes().unwrap(), 24);
    assert_eq!(t.device().unwrap(), "cpu");
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    t.copy_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let mut out = [0f32; 6];
    t.copy_to(&mut out).unwrap();
    assert_eq!(out, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let s = Tensor::new(DType::I64, &[]).unwrap();
    assert_eq!(s.numel().unwrap(), 1);
    assert_eq!(s.shape().unwrap(), Vec::<i64>::new());

    let i = Tensor::from_slice(&[3], &[7i32, 8, 9]).unwrap();
    assert_eq!(i.dtype().unwrap(), DType::I32);
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![7, 8, 9]);
}

#[test]
fn dtype_conversion_and_names() {
    for (d, name, size) in [
        (DType::F32, "f32", 4),
        (DType::BF16, "bf16", 2),
        (DType::F16, "f16", 2),
        (DType::I32, "i32", 4),
        (DType::I64, "i64", 8),
    ] {
        assert_eq!(d.name(), name);
        assert_eq!(d.size(), size);
        assert_eq!(DType::from_code(d.code()), Some(d));
    }
    assert_eq!(DType::from_code(0), None);
    let src = Tensor::from_slice(&[3], &[1.5f32, -2.25, 3.0]).unwrap();
    let mut half = Tensor::new(DType::BF16, &[3]).unwrap();
    src.copy_into(&mut half).unwrap();
    let mut raw = [0u8; 6];
    half.copy_to_bytes(&mut raw).unwrap();
    assert_eq!(u16::from_le_bytes([raw[0], raw[1]]), 0x3fc0); // 1.5 in bf16
    let mut back = Tensor::new(DType::F32, &[3]).unwrap();
    half.copy_into(&mut back).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.5, -2.25, 3.0]);
}

#[test]
fn matmul_and_softmax() {
    let a = Tensor::from_slice(&[2, 2], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let b = Tensor::from_slice(&[2, 2], &[5.0f32, 6.0, 7.0, 8.0]).unwrap();
    let mut c = Tensor::new(DType::F32, &[2, 2]).unwrap();
    matmul(&a, &b, false, false, &mut c).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![19.0, 22.0, 43.0, 50.0]);
    let x = Tensor::from_slice(&[1, 2], &[0.0f32, 0.0]).unwrap();
    let mut y = Tensor::new(DType::F32, &[1, 2]).unwrap();
    softmax(&x, &mut y).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
}

#[test]
fn mesh_queries_and_all_reduce() {
    let mesh = Mesh::new("local", 4, &[("dp", 2.into()), ("tp", 2.into())]).unwrap();
    assert_eq!(mesh.world_size().unwrap(), 4);
    assert_eq!(mesh.local_rank_count().unwrap(), 4);
    assert_eq!(mesh.axis_size("tp").unwrap(), 2);
    assert_eq!(mesh.axis_size("world").unwrap(), 4);
    assert_eq!(mesh.coord(3, "tp").unwrap(), 1);
    assert_eq!(mesh.backend().unwrap(), "local");

    let mut x = mesh.tensor(DType::F32, &[2]).unwrap();
    assert_eq!(x.piece_count().unwrap(), 4);
    for i in 0..4 {
        let rank = mesh.local_rank(i as i32).unwrap() as f32;
        x.piece(i).unwrap().copy_from(&[rank, 1.0]).unwrap();
    }
    mesh.all_reduce("tp", &mut x, ReduceOp::Sum).unwrap();
    let got: Vec<Vec<f32>> = (0..4)
        .map(|i| x.piece(i).unwrap().to_vec().unwrap())
        .collect();
    assert_eq!(
        got,
        vec![
            vec![1.0, 2.0],
            vec![1.0, 2.0],
            vec![5.0, 2.0],
            vec![5.0, 2.0]
        ]
    );
    mesh.all_reduce("world", &mut x, ReduceOp::Max).unwrap();
    assert_eq!(x.piece(0).unwrap().to_vec::<f32>().unwrap(), vec![5.0, 2.0]);

    let mut g = mesh.tensor(DType::F32, &[8]).unwrap();
    mesh.all_gather("world", &x, &mut g).unwrap();
    assert_eq!(
        g.piece(2).unwrap().to_vec::<f32>().unwrap(),
        vec![5.0, 2.0, 5.0, 2.0, 5.0, 2.0, 5.0, 2.0]
    );
    mesh.barrier("world").unwrap();
    let stats = mesh.comm_stats(0, "tp", "all_reduce").unwrap();
    assert_eq!(stats.calls, 1);
    assert!(mesh.comm_report_json().unwrap().contains("\"backend\""));
    // The history: every call, each axis numbered from 1, the last one the barrier.
    let history = mesh.comm_history_json().unwrap();
    assert!(history.contains("\"failure\":null"), "{history}");
    assert!(history.contains("\"kind\":\"barrier\""), "{history}");
}

#[test]
fn memory_ledger() {
    let before = memory_stats("cpu", MemTag::Param).unwrap();
    let t = Tensor::on_device(DType::F32, &[1024], "cpu", &[("tag", "param".into())]).unwrap();
    let during = memory_stats("cpu", MemTag::Param).unwrap();
    assert!(during.peak >= during.current);
    assert!(during.current >= 4096, "{before:?} {during:?}");
    drop(t);
    assert_eq!(MemTag::KvCache.name(), "kv_cache");
    assert!(dtrain::memory_report_json("cpu")
        .unwrap()
        .contains("\"device\""));
    assert_eq!(dtrain::device_count("cpu").unwrap(), 1);
}
