"""Trains a tiny GPT data-parallel over two in-process ranks on 3-digit addition, saves a
checkpoint and continues a prompt. Usage: python train_gpt.py [checkpoint-stem]
(DTRAIN_BACKEND=mpi mpirun -np 2 python train_gpt.py: one rank per process, rank 0 prints)"""
import os
import sys

import dtrain


def main():
    stem = sys.argv[1] if len(sys.argv) > 1 else "sample-ckpt/gpt"
    backend, world = ("mpi", 0) if os.environ.get("DTRAIN_BACKEND") == "mpi" else ("local", 2)
    with dtrain.Mesh(backend, world) as mesh, dtrain.GPT(preset="gpt-tiny", seed=1) as model, \
            dtrain.Optimizer(model, "adamw", lr=0.003) as optimizer, \
            dtrain.Engine(mesh, model, optimizer) as engine, \
            dtrain.Dataset("addition", digits=3, seed=7, split="train") as data, \
            dtrain.Loader(data, 16, seed=0) as loader:
        say = print if mesh.local_ranks[0] == 0 else (lambda *_: None)
        inputs, targets = loader.new_batch()
        for step in range(1, 31):
            loader.next(inputs, targets)
            loss = engine.train_step(inputs, targets)
            say(f"step {step} loss {loss:.8f}")

        engine.save(stem)
        say(f"saved {stem}")

        new = engine.generate(b"123+456=", max_new_tokens=5)
        text = "".join(chr(t) if 32 <= t < 127 else "?" for t in new)
        say(f"123+456={text}")


if __name__ == "__main__":
    main()
