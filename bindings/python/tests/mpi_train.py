"""Run under mpirun: the samples' configuration with one rank per process. Rank 0 prints
`step N loss X` lines, which must match the in-process run's."""
import sys

import dtrain

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
with dtrain.Mesh("mpi", 0) as mesh, dtrain.GPT(preset="gpt-tiny", seed=1) as model, \
        dtrain.Optimizer(model, "adamw", lr=0.003) as opt, dtrain.Engine(mesh, model, opt) as engine, \
        dtrain.Dataset("addition", digits=3, seed=7, split="train") as data, dtrain.Loader(data, 16, seed=0) as loader:
    rank = mesh.local_ranks[0]
    x, y = loader.new_batch()
    for step in range(1, steps + 1):
        loss = engine.train_step(*loader.next(x, y))
        if rank == 0:
            print(f"step {step} loss {loss:.8f}", flush=True)
