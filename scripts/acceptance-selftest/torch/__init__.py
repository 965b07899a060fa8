# Stand-in for PyTorch, for scripts/acceptance-selftest.sh only (never on a GPU machine): "allocating"
# a CUDA tensor lists this process in the fake NVML's state file ($FAKE_NVML_STATE, rewritten with
# rename) under the GPU whose UUID is in CUDA_VISIBLE_DEVICES; SIGTERM removes it again.
# FAKE_TORCH_PID_OFFSET=N lists pid+N instead, as NVML does from another PID namespace.
import json
import os
import signal
import sys

_PID = os.getpid() + int(os.environ.get("FAKE_TORCH_PID_OFFSET", "0"))
_BYTES = 1536 << 20  # the 1 GiB tensor plus a CUDA context


def _edit(add):
    path = os.environ["FAKE_NVML_STATE"]
    with open(path) as f:
        d = json.load(f)
    for dev in d["devices"]:
        procs = [p for p in dev.get("processes", []) if p["pid"] != _PID]
        if dev["uuid"] == os.environ.get("CUDA_VISIBLE_DEVICES"):
            delta = _BYTES if add else -_BYTES
            dev["memory"]["used"] += delta
            dev["memory"]["free"] -= delta
            if add:
                procs.append({"pid": _PID, "used_memory": _BYTES})
        dev["processes"] = procs
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.rename(path + ".tmp", path)


def _term(*_):
    _edit(False)
    sys.exit(0)


signal.signal(signal.SIGTERM, _term)


def ones(n, device=None):
    _edit(True)


class cuda:
    @staticmethod
    def synchronize():
        pass
