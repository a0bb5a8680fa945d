"""Reads the JSON that dt_*_json functions write into a caller's buffer."""
import json


def read_json(call):
    """call(buf) writes into the bytearray buf and returns the bytes needed (NUL included)."""
    needed = call(bytearray(0))
    buf = bytearray(needed)
    call(buf)
    text = bytes(buf[:needed - 1]).decode("utf-8")
    return json.loads(text) if text else None
