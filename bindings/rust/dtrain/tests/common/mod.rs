//! Shared helpers: the sample's configuration, batch tensors and scratch paths.
#![allow(dead_code)]
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use dtrain::{DType, Dataset, Engine, Loader, Mesh, Model, Optimizer, Tensor};

pub fn gpt_tiny() -> Model {
    Model::gpt(&[("preset", "gpt-tiny".into()), ("seed", 1.into())]).expect("gpt-tiny")
}

pub fn adamw(model: &Model) -> Optimizer {
    Optimizer::new(model, "adamw", &[("lr", 0.003.into())]).expect("adamw")
}

pub fn addition() -> Dataset {
    Dataset::new(
        "addition",
        &[
            ("digits", 3.into()),
            ("seed", 7.into()),
            ("split", "train".into()),
        ],
    )
    .expect("addition dataset")
}

pub fn loader(dataset: &Dataset) -> Loader {
    Loader::new(dataset, &[("batch", 16.into()), ("seed", 0.into())]).expect("loader")
}

/// inputs and targets: i32 [16, context].
pub fn batch_tensors(dataset: &Dataset) -> (Tensor, Tensor) {
    let shape = [16, dataset.context().unwrap() as i64];
    (
        Tensor::new(DType::I32, &shape).unwrap(),
        Tensor::new(DType::I32, &shape).unwrap(),
    )
}

/// The sample's whole setup: mesh ("local", 2), gpt-tiny, adamw, engine, data.
pub struct Setup {
    pub mesh: Mesh,
    pub model: Model,
    pub optimizer: Optimizer,
    pub engine: Engine,
    pub dataset: Dataset,
    pub loader: Loader,
    pub inputs: Tensor,
    pub targets: Tensor,
}

pub fn setup() -> Setup {
    let mesh = Mesh::new("local", 2, &[]).expect("mesh");
    let model = gpt_tiny();
    let optimizer = adamw(&model);
    let engine = Engine::new(Some(&mesh), &model, &optimizer, &[]).expect("engine");
    let dataset = addition();
    let loader = loader(&dataset);
    let (inputs, targets) = batch_tensors(&dataset);
    Setup {
        mesh,
        model,
        optimizer,
        engine,
        dataset,
        loader,
        inputs,
        targets,
    }
}

impl Setup {
    pub fn step(&mut self) -> f64 {
        self.loader
            .next_into(&mut self.inputs, &mut self.targets)
            .expect("loader.next_into");
        self.engine
            .train_step(&self.inputs, &self.targets)
            .expect("train_step")
    }
}

/// A GPT (8 layers, d_model 256, context 128) and a batch of 32 in 4 micro-batches: one
/// step takes about a second on two cores, well over the cancel delay. No mesh: the engine
/// then checks the flag before every layer.
pub fn big_engine() -> (Engine, Tensor, Tensor) {
    let model = Model::gpt(&[
        ("vocab_size", 256.into()),
        ("context", 128.into()),
        ("n_layer", 8.into()),
        ("n_head", 4.into()),
        ("d_model", 256.into()),
        ("seed", 1.into()),
    ])
    .unwrap();
    let opt = Optimizer::new(&model, "adamw", &[("lr", 0.001.into())]).unwrap();
    let engine = Engine::new(None, &model, &opt, &[("micro_batches", 4.into())]).unwrap();
    let tokens: Vec<i32> = (0..32 * 128).map(|i| (i * 7 + 3) % 256).collect();
    let x = Tensor::from_slice(&[32, 128], &tokens).unwrap();
    let shifted: Vec<i32> = tokens.iter().map(|t| (t + 1) % 256).collect();
    let y = Tensor::from_slice(&[32, 128], &shifted).unwrap();
    (engine, x, y)
}

/// A fresh path under the build's scratch dir (inside the cargo target dir).
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "dtrain-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        name
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
