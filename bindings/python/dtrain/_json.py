"""Reads the JSON (or text) that dt_*_json functions write into a caller's buffer."""
from __future__ import annotations

import json
from typing import Any, Callable


def read_text(call: Callable[[bytearray], int], errors: str = "strict", capacity: int = 0) -> str:
    """call(buf) writes into the bytearray buf and returns the bytes needed (NUL included).
    errors: how undecodable UTF-8 is read (bytes.decode's argument). capacity: the first
    buffer's size (0: ask for the size first), so that a report costly to make (a
    calibration) is made once where it fits."""
    needed = capacity if capacity > 0 else call(bytearray(0))
    while True:
        buf = bytearray(needed)
        again = call(buf)
        if again <= needed:  # else it grew between the two calls: ask again
            return bytes(buf[:max(again, 1) - 1]).decode("utf-8", errors)
        needed = again


def read_json(call: Callable[[bytearray], int], capacity: int = 0) -> Any:
    """read_text parsed as JSON (None for an empty report)."""
    text = read_text(call, capacity=capacity)
    return json.loads(text) if text else None
