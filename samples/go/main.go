// Command sample trains a tiny GPT on 3-digit addition, data parallel over two in-process
// ranks, saves a checkpoint and continues a prompt.
//
//	go run . [checkpoint-stem]   (default "sample-ckpt/gpt")
package main

import (
	"fmt"
	"log"
	"os"
	"strings"

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
	backend, world := "local", 2 // data parallel over 2 ranks in this process
	if os.Getenv("DTRAIN_BACKEND") == "mpi" {
		backend, world = "mpi", 0 // under mpirun: one rank per process
	}
	mesh, err := dtrain.NewMesh(backend, world, nil)
	check(err)
	defer mesh.Close()
	rank, err := mesh.LocalRank(0)
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
	context, err := dataset.Context()
	check(err)
	inputs, err := dtrain.NewTensor(dtrain.I32, 16, context)
	check(err)
	defer inputs.Close()
	targets, err := dtrain.NewTensor(dtrain.I32, 16, context)
	check(err)
	defer targets.Close()

	for step := 1; step <= 30; step++ {
		check(loader.Next(inputs, targets))
		loss, err := engine.TrainStep(inputs, targets)
		check(err)
		say("step %d loss %.8f\n", step, loss)
	}
	check(engine.Save(stem))
	say("saved %s\n", stem)

	prompt := "123+456="
	tokens := make([]int32, len(prompt))
	for i := range prompt {
		tokens[i] = int32(prompt[i]) // byte-level tokens
	}
	out, err := engine.Generate([][]int32{tokens}, dtrain.Options{"max_new_tokens": 5})
	check(err)
	var text strings.Builder
	for _, t := range out[0] {
		if t >= 32 && t < 127 {
			text.WriteByte(byte(t))
		} else {
			text.WriteByte('?') // not printable
		}
	}
	say("%s%s\n", prompt, text.String())
}
