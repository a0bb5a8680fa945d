// Command sample trains a tiny GPT on 3-digit addition, data parallel over two in-process
// ranks, saves a checkpoint and continues a prompt, streaming the answer token by token.
// Ctrl-C stops the training step that is running (within a layer or so) through its
// context, and the program ends cleanly.
//
//	go run . [checkpoint-stem]   (default "sample-ckpt/gpt")
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"dtrain.dev/dtrain"
)

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func main() {
	stem := "sample-ckpt/gpt"
	if len(os.Args) > 1 {
		stem = os.Args[1]
	}

	defer dtrain.Shutdown() // runs last: ends MPI, which Go's exit would skip
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	backend, world := "local", 2 // data parallel over 2 ranks in this process
	if os.Getenv("DTRAIN_BACKEND") == "mpi" {
		backend, world = "mpi", 0 // under mpirun: one rank per process
	}
	mesh, err := dtrain.NewMesh(backend, world, nil)
	check(err)
	defer mesh.Close()
	rank, err := mesh.LocalRank(0) // getters that can fail return an error ...
	check(err)
	say := func(format string, args ...any) { // rank 0 speaks for all
		if rank == 0 {
			fmt.Printf(format, args...)
		}
	}
	model, err := dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1})
	check(err)
	defer model.Close()
	optimizer, err := dtrain.NewOptimizer(model, "adamw", dtrain.Options{"lr": 0.003})
	check(err)
	defer optimizer.Close()
	engine, err := dtrain.NewEngine(mesh, model, optimizer, nil)
	check(err)
	defer engine.Close()

	dataset, err := dtrain.NewDataset("addition", dtrain.Options{"digits": 3, "seed": 7, "split": "train"})
	check(err)
	defer dataset.Close()
	loader, err := dtrain.NewLoader(dataset, dtrain.Options{"batch": 16, "seed": 0})
	check(err)
	defer loader.Close()
	tokens := dataset.Context() // ... those that cannot, on a live handle, do not
	inputs, err := dtrain.NewTensor(dtrain.I32, 16, tokens)
	check(err)
	defer inputs.Close()
	targets, err := dtrain.NewTensor(dtrain.I32, 16, tokens)
	check(err)
	defer targets.Close()

	for step := 1; step <= 30; step++ {
		check(loader.Next(inputs, targets))
		loss, err := engine.TrainStepContext(ctx, inputs, targets)
		if errors.Is(err, context.Canceled) { // Ctrl-C: the step was undone, the engine is fine
			say("interrupted; %d steps taken\n", engine.Step())
			return
		}
		check(err)
		say("step %d loss %.8f\n", step, loss)
	}
	check(engine.Save(stem))
	say("saved %s\n", stem)

	prompt := "123+456="
	ids := make([]int32, len(prompt))
	for i := range prompt {
		ids[i] = int32(prompt[i]) // byte-level tokens
	}
	// The answer arrives on a channel, one token per decode step; leaving the loop early
	// (or Ctrl-C, through ctx) would stop the generation, and the deferred Close cleans up.
	stream, err := engine.Stream(ctx, [][]int32{ids}, dtrain.Options{"max_new_tokens": 5})
	check(err)
	defer stream.Close()
	say("%s", prompt)
	for tok := range stream.Tokens() {
		if tok.ID >= 32 && tok.ID < 127 {
			say("%c", rune(tok.ID))
		} else {
			say("?") // not printable
		}
	}
	say("\n")
	check(stream.Err())
}
