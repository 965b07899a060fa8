"""The daemon's wire format for the benchmarks (docs/protocol.md): a 4-byte big-endian length, then
a JSON request or reply. Shared by bench/daemon_latency.py and bench/web_bench.py."""
import json
import struct


def frame(obj):
    """One request frame: `obj` with the protocol version added."""
    body = json.dumps({"v": 2, **obj}).encode()
    return struct.pack(">I", len(body)) + body


def recv_exact(s, n):
    """Exactly `n` bytes from socket `s`; ConnectionError when it closes first."""
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)
