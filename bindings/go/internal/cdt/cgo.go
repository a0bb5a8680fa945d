// Package cdt is the raw layer of the Go binding: the SWIG-generated wrappers of every
// function in dtrain.h (cdt.go, dtrain_wrap.c; regenerate them with ../../generate.sh,
// never edit them by hand) plus this file, which links the library through pkg-config.
//
// Calls keep their C names (Dt_mesh_create), take handles as the uintptr types Mesh,
// Tensor, ..., and return a Status whose Message was read inside the same native call.
// Out-values are Go pointers the call fills in. Use package dtrain instead.
package cdt

// #cgo pkg-config: dtrain
import "C"
