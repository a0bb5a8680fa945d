"""Reads the JSON (or text) that dt_*_json functions write into a caller's buffer."""
from __future__ import annotations

import json
from typing import Any, Callable


def read_text(call: Callable[[bytearray], int], errors: str = "strict") -> str:
    """call(buf) writes into the bytearray buf and returns the bytes needed (NUL included).
    errors: how undecodable UTF-8 is read (bytes.decode's argument)."""
    needed = call(bytearray(0))
    while True:
        buf = bytearray(needed)
        again = call(buf)
        if again <= needed:  # else it grew between the two calls: ask again
            return bytes(buf[:max(again, 1) - 1]).decode("utf-8", errors)
        needed = again


def read_json(call: Callable[[bytearray], int]) -> Any:
    """read_text parsed as JSON (None for an empty report)."""
    text = read_text(call)
    return json.loads(text) if text else None
