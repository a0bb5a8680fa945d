package dtrain_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"dtrain.dev/dtrain"
)

// newExampleEngine makes a small GPT, an engine on this process alone and a batch, and a
// function that closes them all.
func newExampleEngine() (*dtrain.Engine, *dtrain.Tensor, *dtrain.Tensor, func()) {
	model, err := dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1})
	if err != nil {
		log.Fatal(err)
	}
	opt, err := dtrain.NewOptimizer(model, "adamw", dtrain.Options{"lr": 0.003})
	if err != nil {
		log.Fatal(err)
	}
	engine, err := dtrain.NewEngine(nil, model, opt, nil)
	if err != nil {
		log.Fatal(err)
	}
	inputs, _ := dtrain.NewTensor(dtrain.I32, 4, 64)
	targets, _ := dtrain.NewTensor(dtrain.I32, 4, 64)
	in, _ := inputs.Int32View()
	tg, _ := targets.Int32View()
	for i := range in {
		in[i], tg[i] = int32('0'+i%10), int32('0'+(i+1)%10)
	}
	return engine, inputs, targets, func() {
		for _, h := range []interface{ Close() error }{engine, opt, model, inputs, targets} {
			h.Close()
		}
	}
}

// A train step that a context can stop: here one whose context is already cancelled, which
// fails at once and changes nothing, then one with a generous timeout, which completes.
func ExampleEngine_TrainStepContext() {
	engine, inputs, targets, closeAll := newExampleEngine()
	defer closeAll()

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // in real code: a signal, a request that went away, a deadline
	_, err := engine.TrainStepContext(ctx, inputs, targets)
	fmt.Println(errors.Is(err, context.Canceled), errors.Is(err, dtrain.ErrCancelled), engine.Step())

	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := engine.TrainStepContext(ctx, inputs, targets); err != nil {
		log.Fatal(err)
	}
	fmt.Println(engine.Step())
	// Output:
	// true true 0
	// 1
}

// Streaming on a channel: range over the tokens, and leave whenever you like; the deferred
// Close stops the generation and releases everything it held.
func ExampleEngine_Stream() {
	engine, _, _, closeAll := newExampleEngine()
	defer closeAll()
	prompt := []int32{'1', '2', '+', '3', '='}

	s, err := engine.Stream(context.Background(), [][]int32{prompt}, dtrain.Options{"max_new_tokens": 32})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var got []int32
	for tok := range s.Tokens() {
		got = append(got, tok.ID)
		if len(got) == 3 {
			break // enough
		}
	}
	s.Close() // stops the rest now; the engine is free again
	fmt.Println(len(got), s.Err())

	all, err := engine.Generate([][]int32{prompt}, dtrain.Options{"max_new_tokens": 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fmt.Sprint(all[0]) == fmt.Sprint(got))
	// Output:
	// 3 <nil>
	// true
}

// The callback form, stopped by its context: onToken cancels after two tokens, and no
// token follows.
func ExampleEngine_GenerateStreamContext() {
	engine, _, _, closeAll := newExampleEngine()
	defer closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	n := 0
	_, err := engine.GenerateStreamContext(ctx, [][]int32{{'7'}}, nil, func(prompt int, token int32) {
		if n++; n == 2 {
			cancel()
		}
	})
	fmt.Println(n, errors.Is(err, context.Canceled))
	// Output: 2 true
}

// A zero-copy view: a Go slice over the tensor's own memory, valid while the tensor lives.
func ExampleTensor_Float32View() {
	x, err := dtrain.NewTensor(dtrain.F32, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close() // keeps x, and so the view's memory, alive to the end
	v, err := x.Float32View()
	if err != nil {
		log.Fatal(err)
	}
	v[1] = 2.5 // writes the tensor
	out, _ := x.Float32s()
	fmt.Println(out, x.Shape(), x.DType())
	// Output: [0 2.5 0] [3] f32
}
