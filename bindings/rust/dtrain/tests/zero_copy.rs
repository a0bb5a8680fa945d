//! Tensor memory shared without copies: slices over a tensor, tensors over a Vec.
mod common;

use common::*;
use dtrain::{matmul, DType, Mesh, Status, Tensor};

#[test]
fn a_vec_lent_to_a_tensor_round_trips_without_a_copy() {
    let v: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let addr = v.as_ptr();
    let mut t = Tensor::from_vec(v, &[2, 3]).unwrap();
    assert_eq!(t.shape().unwrap(), vec![2, 3]);
    assert_eq!(t.dtype().unwrap(), DType::F32);
    // The same memory, both ways.
    assert_eq!(t.as_slice::<f32>().unwrap().as_ptr(), addr);
    assert_eq!(
        t.as_mut_slice::<f32>().unwrap().as_mut_ptr() as *const f32,
        addr
    );
    t.as_mut_slice::<f32>().unwrap()[4] = 40.0;
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, 3.0, 40.0, 5.0]
    );
    // Writes by the library are seen through the slice.
    t.copy_from(&[6.0f32, 5.0, 4.0, 3.0, 2.0, 1.0]).unwrap();
    assert_eq!(
        t.as_slice::<f32>().unwrap(),
        &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    );
    t.fill_uniform(1, "w", 0, 0.0, 1.0).unwrap();
    assert!(t
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .all(|v| (0.0..1.0).contains(v)));
}

#[test]
fn lent_tensors_work_in_ops_and_outputs_are_viewed_in_place() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    let mut c = Tensor::from_vec(vec![0.0f32; 4], &[2, 2]).unwrap();
    let c_addr = c.as_slice::<f32>().unwrap().as_ptr();
    matmul(&a, &b, false, false, &mut c).unwrap();
    assert_eq!(c.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(c.as_slice::<f32>().unwrap().as_ptr(), c_addr);

    let ints = Tensor::from_vec(vec![1i64, -2, 3], &[3]).unwrap();
    assert_eq!(ints.as_slice::<i64>().unwrap(), &[1, -2, 3]);
    let mut made = Tensor::new(DType::I32, &[2, 2]).unwrap();
    made.as_mut_slice::<i32>()
        .unwrap()
        .copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(made.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
}

#[test]
fn a_lent_vec_lives_as_long_as_its_last_view() {
    let v = vec![7i32; 5];
    let addr = v.as_ptr();
    let mut t = Tensor::from_vec(v, &[5]).unwrap();
    let p = t.piece(0).unwrap();
    drop(t);
    // The piece alone holds the memory now, so it may be sliced.
    assert_eq!(p.as_slice::<i32>().unwrap().as_ptr(), addr);
    assert_eq!(p.as_slice::<i32>().unwrap(), &[7; 5]);
}

#[test]
fn slices_that_could_alias_or_mistype_are_refused() {
    let mut t = Tensor::new(DType::F32, &[4]).unwrap();
    let err = t.as_slice::<i32>().unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(
        err.message.contains("f32") && err.message.contains("i32"),
        "{err}"
    );
    assert!(t.as_mut_slice::<i64>().is_err());
    // bf16 has no host element type here: copy its bytes instead.
    let h = Tensor::new(DType::BF16, &[4]).unwrap();
    assert!(h.as_slice::<f32>().is_err());

    // Memory another handle can write: a parameter view, a mesh tensor and its pieces.
    let model = gpt_tiny();
    let w = model.param("wte.weight").unwrap();
    let err = w.as_slice::<f32>().unwrap_err();
    assert!(err.message.contains("shares"), "{err}");
    let mesh = Mesh::new("local", 2, &[]).unwrap();
    let mut x = mesh.tensor(DType::F32, &[2]).unwrap();
    assert!(x.as_slice::<f32>().is_err());
    let mut piece = x.piece(0).unwrap();
    assert!(piece.as_mut_slice::<f32>().is_err());

    // A piece of a plain tensor shares it: neither is sliced while both live.
    let mut u = Tensor::new(DType::F32, &[2]).unwrap();
    let up = u.piece(0).unwrap();
    assert!(u.as_slice::<f32>().is_err());
    drop(up);
    assert_eq!(u.as_slice::<f32>().unwrap(), &[0.0, 0.0]);

    // Closed.
    t.close();
    assert!(t.as_slice::<f32>().is_err());
}

#[test]
fn from_vec_checks_the_shape() {
    let err = Tensor::from_vec(vec![1.0f32; 5], &[2, 3]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    for shape in [&[-1i64][..], &[i64::MAX, i64::MAX], &[1 << 62, 4], &[1; 9]] {
        let err = Tensor::from_vec(vec![1.0f32; 1], shape).unwrap_err();
        assert_eq!(err.status, Status::INVALID_ARGUMENT, "{shape:?}: {err}");
    }
    // Every dim must be >= 1: an empty vector is refused (and freed) by the library.
    let err = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    // A scalar.
    let s = Tensor::from_vec(vec![2.5f32], &[]).unwrap();
    assert_eq!(s.as_slice::<f32>().unwrap(), &[2.5]);
}
