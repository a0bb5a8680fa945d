"""Trains a tiny GPT data-parallel over two in-process ranks on 3-digit addition, saves a
checkpoint and streams the continuation of a prompt. Usage: python train_gpt.py [checkpoint-stem]
(DTRAIN_BACKEND=mpi mpirun -np 2 python train_gpt.py: one rank per process, rank 0 prints)

The idioms: handles in `with` blocks, `for inputs, targets in loader`, a CancelToken that
another thread (here a watchdog timer) may raise to stop a train step, and a generator of
tokens that cancels the generation when the loop is left early."""
import os
import sys
import threading

import dtrain

STEPS = 30
WATCHDOG_S = 600.0  # a step still running this long after the start is cancelled


def main():
    stem = sys.argv[1] if len(sys.argv) > 1 else "sample-ckpt/gpt"
    backend, world = ("mpi", 0) if os.environ.get("DTRAIN_BACKEND") == "mpi" else ("local", 2)
    with dtrain.Mesh(backend, world) as mesh, dtrain.GPT(preset="gpt-tiny", seed=1) as model, \
            dtrain.Optimizer(model, "adamw", lr=0.003) as optimizer, \
            dtrain.Engine(mesh, model, optimizer) as engine, \
            dtrain.Dataset("addition", digits=3, seed=7, split="train") as data, \
            dtrain.Loader(data, 16, seed=0) as loader, \
            dtrain.CancelToken() as watchdog:
        say = print if mesh.local_ranks[0] == 0 else (lambda *_: None)
        # token.cancel() is safe from any thread: the running step raises CancelledError
        # within a layer's time, having changed nothing, and the engine stays usable.
        timer = threading.Timer(WATCHDOG_S, watchdog.cancel)
        timer.start()
        try:
            for step, (inputs, targets) in enumerate(loader, start=1):
                loss = engine.train_step(inputs, targets, cancel=watchdog)
                say(f"step {step} loss {loss:.8f}")
                if step == STEPS:
                    break
        except dtrain.CancelledError:
            say(f"cancelled by the watchdog after {engine.step} steps")
            raise
        finally:
            timer.cancel()

        engine.save(stem)
        say(f"saved {stem}")

        # Tokens as they are made; a `break` here would stop the generation there.
        text = ""
        for token in engine.stream(b"123+456=", max_new_tokens=5):
            text += chr(token) if 32 <= token < 127 else "?"
        say(f"123+456={text}")


if __name__ == "__main__":
    main()
