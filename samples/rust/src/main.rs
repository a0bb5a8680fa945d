//! Trains a tiny GPT on 3-digit addition, data parallel over two in-process ranks, then
//! saves a checkpoint and continues a prompt. The other languages' samples do the same, so
//! their `step N loss X` lines can be compared.
//!
//! Usage: dtrain-sample [CHECKPOINT_STEM]   (default "sample-ckpt/gpt")
//!
//! The idioms: `?` on every call (a `dtrain::Error` carries the library's status and
//! message), handles released by scope, the loader as an iterator of batches, generation as
//! an iterator of tokens (leaving it early stops the generation), and a `CancelToken` that
//! another thread may raise to stop a step without harming the engine.
use dtrain::{CancelToken, Dataset, Engine, Loader, Mesh, Model, Optimizer};

fn main() -> dtrain::Result<()> {
    let stem = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "sample-ckpt/gpt".to_string());

    // Two ranks as threads of this process, the engine training one replica on each; or,
    // with DTRAIN_BACKEND=mpi under mpirun, one rank per process (rank 0 prints).
    let mesh = match std::env::var("DTRAIN_BACKEND").as_deref() {
        Ok("mpi") => Mesh::new("mpi", 0, &[])?,
        _ => Mesh::new("local", 2, &[])?,
    };
    let printer = mesh.local_rank(0)? == 0;
    let model = Model::gpt(&[("preset", "gpt-tiny".into()), ("seed", 1.into())])?;
    let optimizer = Optimizer::new(&model, "adamw", &[("lr", 0.003.into())])?;
    let mut engine = Engine::new(Some(&mesh), &model, &optimizer, &[])?;

    let dataset = Dataset::new(
        "addition",
        &[
            ("digits", 3.into()),
            ("seed", 7.into()),
            ("split", "train".into()),
        ],
    )?;
    let loader = Loader::new(&dataset, &[("batch", 16.into()), ("seed", 0.into())])?;

    // A watchdog (a deadline timer, a Ctrl-C handler) would hold a clone of this token and
    // raise it from its own thread: the running step then returns Err(CANCELLED), changes
    // nothing, and the engine goes on. Nothing raises it here.
    let stop = CancelToken::new()?;
    for (step, batch) in (1..=30).zip(loader) {
        let (inputs, targets) = batch?;
        let loss = engine.train_step_cancellable(&inputs, &targets, &stop)?;
        if printer {
            println!("step {step} loss {loss:.8}");
        }
    }

    engine.save(&stem)?;
    if printer {
        println!("saved {stem}");
    }

    let prompt = "123+456=";
    let tokens: Vec<i32> = prompt.bytes().map(i32::from).collect();
    let mut text = String::new();
    for token in engine.stream(&tokens, &[("max_new_tokens", 5.into())])? {
        text.push(match u8::try_from(token?) {
            Ok(b) if b.is_ascii_graphic() || b == b' ' => b as char,
            _ => '?',
        });
    }
    if printer {
        println!("{prompt}{text}");
    }
    Ok(()) // every handle is released as it goes out of scope
}
