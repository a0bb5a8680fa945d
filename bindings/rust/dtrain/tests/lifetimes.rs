//! Handles close in any order, explicit close then drop never double-frees, and many
//! handles come and go without leaking.
mod common;

use common::*;
use dtrain::{memory_stats, DType, Engine, MemTag, Mesh, Model, Optimizer, ReduceOp, Tensor};

#[test]
fn engine_outlives_mesh_model_and_optimizer() {
    let mut s = setup();
    let first = s.step();
    // Parents first: the engine keeps them alive in the library.
    s.mesh.close();
    s.model.close();
    s.optimizer.close();
    s.dataset.close(); // the loader keeps the data alive
    let second = s.step();
    assert!(first.is_finite() && second.is_finite());
    assert!(s.engine.step().unwrap() == 2);
    s.engine.close();
    s.loader.close();
    // Tensors last; then drop runs on already-closed handles.
    s.inputs.close();
    s.targets.close();
}

#[test]
fn reverse_and_shuffled_drop_orders() {
    // Drop in creation order (Rust's default is the reverse).
    let s = setup();
    let Setup {
        mesh,
        model,
        optimizer,
        engine,
        dataset,
        loader,
        inputs,
        targets,
    } = s;
    drop(mesh);
    drop(model);
    drop(dataset);
    drop(inputs);
    drop(optimizer);
    drop(loader);
    drop(engine);
    drop(targets);
}

#[test]
fn engine_closed_first_leaves_the_rest_usable() {
    let mut s = setup();
    s.step();
    s.engine.close();
    assert!(s.model.param_count().unwrap() > 0);
    assert!(s.mesh.world_size().unwrap() == 2);
    // A new engine on the same handles still trains.
    let mut e = Engine::new(Some(&s.mesh), &s.model, &s.optimizer, &[]).unwrap();
    s.loader.next_into(&mut s.inputs, &mut s.targets).unwrap();
    assert!(e.train_step(&s.inputs, &s.targets).unwrap().is_finite());
}

#[test]
fn close_is_idempotent_and_drop_after_close_is_fine() {
    let mut t = Tensor::new(DType::F32, &[4]).unwrap();
    t.close();
    t.close();
    assert!(t.is_closed());
    let mut m = gpt_tiny();
    let mut o = adamw(&m);
    m.close();
    m.close();
    o.close();
    o.close();
    let mut mesh = Mesh::new("local", 2, &[]).unwrap();
    mesh.close();
    mesh.close();
    // All dropped here on closed handles.
}

#[test]
fn views_outlive_their_parents() {
    // A piece keeps its mesh tensor (and the mesh) alive.
    let mesh = Mesh::new("local", 2, &[]).unwrap();
    let mut x = mesh.tensor(DType::F32, &[3]).unwrap();
    let mut p0 = x.piece(0).unwrap();
    p0.copy_from(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut p1 = x.piece(1).unwrap();
    p1.copy_from(&[10.0f32, 20.0, 30.0]).unwrap();
    mesh.all_reduce("world", &mut x, ReduceOp::Sum).unwrap();
    drop(mesh);
    x.close();
    assert_eq!(p0.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);
    assert_eq!(p1.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);

    // A parameter view keeps the model alive.
    let model = gpt_tiny();
    let name = model.param_names().unwrap()[0].clone();
    let w = model.param(&name).unwrap();
    let n = w.numel().unwrap();
    drop(model);
    assert_eq!(w.to_vec::<f32>().unwrap().len(), n);
}

#[test]
fn create_and_drop_many() {
    // Counted under a tag nothing else in this test binary uses, so the concurrent tests
    // do not move the numbers.
    let tag = [("tag", "kv_cache".into())];
    let before = memory_stats("cpu", MemTag::KvCache).unwrap().current;
    for i in 0..200 {
        let mut t = Tensor::on_device(DType::F32, &[64, 64], "cpu", &tag).unwrap();
        t.fill_uniform(i, "x", 0, 0.0, 1.0).unwrap();
        if i % 2 == 0 {
            t.close(); // then dropped again
        }
    }
    for _ in 0..20 {
        let m = Model::mlp(&[("sizes", "4,8,1".into()), ("seed", 1.into())]).unwrap();
        let o = Optimizer::new(&m, "sgd", &[]).unwrap();
        drop(m);
        drop(o);
    }
    let after = memory_stats("cpu", MemTag::KvCache).unwrap().current;
    assert!(
        after - before < 64 * 64 * 4,
        "before {before}, after {after}"
    );
}
