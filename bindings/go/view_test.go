package dtrain_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"dtrain.dev/dtrain"
)

// A view is the tensor's memory: what is written through it is what a copy reads out of
// the tensor, and what is copied into the tensor is what the view reads.
func TestViewRoundTrip(t *testing.T) {
	defer guard(t)
	x := must(dtrain.NewTensor(dtrain.F32, 2, 3))
	defer x.Close()
	v := must(x.Float32View())
	if len(v) != 6 {
		t.Fatalf("view of %d elements; want 6", len(v))
	}
	for i := range v {
		v[i] = 1.5 * float32(i)
	}
	y := must(dtrain.NewTensor(dtrain.F32, 2, 3))
	defer y.Close()
	ok(t, x.CopyTo(y))
	if got := must(y.Float32s()); fmt.Sprint(got) != fmt.Sprint(v) {
		t.Fatalf("wrote %v through the view, CopyTo read %v", v, got)
	}
	ok(t, x.CopyFromFloat32([]float32{6, 5, 4, 3, 2, 1}))
	if fmt.Sprint(v) != "[6 5 4 3 2 1]" {
		t.Fatalf("the view reads %v after a copy in", v)
	}

	// Integer views, and a converting CopyTo from one into the other.
	i32 := must(dtrain.NewTensor(dtrain.I32, 4))
	defer i32.Close()
	i64 := must(dtrain.NewTensor(dtrain.I64, 4))
	defer i64.Close()
	copy(must(i32.Int32View()), []int32{-7, 0, 7, 1 << 30})
	ok(t, i32.CopyTo(i64))
	if got := must(i64.Int64View()); fmt.Sprint(got) != "[-7 0 7 1073741824]" {
		t.Fatalf("i32 -> i64 through views: %v", got)
	}

	// bf16 as its raw bits: 1.0 is 0x3f80, -2.0 is 0xc000.
	h := must(dtrain.NewTensor(dtrain.BF16, 2))
	defer h.Close()
	raw := must(h.BytesView())
	if len(raw) != 4 {
		t.Fatalf("bf16 bytes view of %d bytes; want 4", len(raw))
	}
	binary.LittleEndian.PutUint16(raw[0:], 0x3f80)
	binary.LittleEndian.PutUint16(raw[2:], 0xc000)
	f := must(dtrain.NewTensor(dtrain.F32, 2))
	defer f.Close()
	ok(t, h.CopyTo(f))
	if got := must(f.Float32s()); fmt.Sprint(got) != "[1 -2]" {
		t.Fatalf("bf16 bits through the view read as %v", got)
	}
	runtime.KeepAlive(x) // the views above are used up to here (the defers keep them too)
}

// Views check the dtype, the handle and the layout before they share anything.
func TestViewErrors(t *testing.T) {
	defer guard(t)
	x := must(dtrain.NewTensor(dtrain.F32, 3))
	_, err := x.Int32View()
	wantErr(t, err, dtrain.ErrInvalidArgument, "Int32View", "f32")
	_, err = x.Int64View()
	wantErr(t, err, dtrain.ErrInvalidArgument, "Int64View")
	ok(t, x.Close())
	_, err = x.Float32View()
	wantErr(t, err, dtrain.ErrInvalidArgument, "closed")
	var nilTensor *dtrain.Tensor
	_, err = nilTensor.BytesView()
	wantErr(t, err, dtrain.ErrInvalidArgument, "nil")

	// A mesh tensor has one piece per local rank: view a piece, which shares its memory.
	mesh := must(dtrain.NewMesh("local", 2, nil))
	defer mesh.Close()
	m := must(mesh.NewTensor(dtrain.F32, 2))
	defer m.Close()
	_, err = m.Float32View()
	wantErr(t, err, dtrain.ErrInvalidArgument, "mesh tensor")
	p := must(m.Piece(1))
	defer p.Close()
	copy(must(p.Float32View()), []float32{4, 2})
	again := must(m.Piece(1))
	defer again.Close()
	if got := must(again.Float32s()); fmt.Sprint(got) != "[4 2]" {
		t.Fatalf("piece 1 reads %v after a write through a view of it", got)
	}
}
