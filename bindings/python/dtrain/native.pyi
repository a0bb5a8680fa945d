# The raw module SWIG generates from bindings/swig/dtrain.i (one function per dt_* call,
# out-pointers returned): untyped, so to a type checker every name in it is Any. The
# typed API is the dtrain package's classes over it.
from typing import Any

def __getattr__(name: str) -> Any: ...
