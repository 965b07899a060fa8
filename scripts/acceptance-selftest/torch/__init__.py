# Stand-in for PyTorch, for scripts/acceptance-selftest.sh and the dry run of scripts/gpu-acceptance.sh
# only (never on a GPU machine): just enough of torch for the acceptance jobs (torch.ones in the
# process check; scripts/acceptance/torch_job.py and leaver.py in the `gpulane run` checks), over
# the fake NVML's state file ($FAKE_NVML_STATE, rewritten with rename under an flock on
# $FAKE_NVML_STATE.lock, so concurrent stand-ins do not lose each other's edits).
#
# - The visible devices come from CUDA_VISIBLE_DEVICES (indices in PCI bus order, as with
#   CUDA_DEVICE_ORDER=PCI_BUS_ID, or GPU-UUIDs; parsing stops at the first invalid entry, as CUDA's
#   does); unset means all.
# - The first CUDA allocation lists this process under its device 0 with a 512 MiB context; every
#   allocation adds its bytes (nothing is given back before exit, like PyTorch's caching allocator).
#   A normal exit or SIGTERM removes the entry again; after SIGKILL it stays until
#   scripts/acceptance-selftest/fake_gpu_driver.py (the stand-in for the driver) removes it.
# - torch.cuda.synchronize() sleeps 20 ms, standing in for GPU work. A tensor of one known value
#   (ones, zeros, fill_, a matmul of two such) keeps it: (ones(n, n) @ ones(n, n))[0, 0].item() == n.
# - get_device_properties(i).uuid prints as torch's does, without the "GPU-" prefix.
# FAKE_TORCH_PID_OFFSET=N lists pid+N instead, as NVML does from another PID namespace.
# FAKE_TORCH_REVERSE_ORDER=1 numbers the devices in reverse PCI order (a wrong CUDA numbering).
import atexit
import fcntl
import json
import os
import signal
import sys
import time

__version__ = "0.0-stand-in"

_REAL_PID = os.getpid()
_PID = _REAL_PID + int(os.environ.get("FAKE_TORCH_PID_OFFSET", "0"))
_CONTEXT = 512 << 20
_held = 0  # bytes listed for this process (context + allocations); 0: not listed


def _state_path():
    return os.environ["FAKE_NVML_STATE"]


def _load():
    with open(_state_path()) as f:
        return json.load(f)


def _visible_devices(d=None):
    """The state's devices that CUDA would show, in CUDA order."""
    d = d or _load()
    devs = sorted(d["devices"], key=lambda g: g.get("pci_bus_id", ""))
    if os.environ.get("FAKE_TORCH_REVERSE_ORDER"):
        devs.reverse()  # a CUDA numbering that is not PCI order (what CUDA_DEVICE_ORDER=PCI_BUS_ID prevents)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return devs
    out = []
    for item in cvd.split(","):
        item = item.strip()
        if item.isdigit() and int(item) < len(devs):
            g = devs[int(item)]
        else:
            g = next((g for g in devs if item.startswith("GPU-") and g["uuid"].startswith(item)), None)
        if g is None or g in out:
            break
        out.append(g)
    return out


def _set_listed(total):
    """Lists this process with `total` bytes under visible device 0 (0: removes it everywhere)."""
    global _held
    path = _state_path()
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        d = _load()
        target = None
        if total:
            vis = _visible_devices(d)
            if not vis:
                raise RuntimeError("stand-in torch: no CUDA device visible (CUDA_VISIBLE_DEVICES=%r)"
                                   % os.environ.get("CUDA_VISIBLE_DEVICES"))
            target = vis[0]["uuid"]
        for dev in d["devices"]:
            keep = []
            for p in dev.get("processes", []):
                if p["pid"] == _PID:
                    dev["memory"]["used"] -= p.get("used_memory", 0)
                    dev["memory"]["free"] += p.get("used_memory", 0)
                else:
                    keep.append(p)
            if dev["uuid"] == target:
                keep.append({"pid": _PID, "used_memory": total, "stand_in": True, "real_pid": _REAL_PID})
                dev["memory"]["used"] += total
                dev["memory"]["free"] -= total
            dev["processes"] = keep
        with open(path + ".tmp%d" % _REAL_PID, "w") as f:
            json.dump(d, f)
        os.rename(path + ".tmp%d" % _REAL_PID, path)
    _held = total


def _allocate(nbytes, device):
    if device is None or "cuda" not in str(device):
        return
    _set_listed((_held or _CONTEXT) + int(nbytes))


def _cleanup():
    if _held:
        _set_listed(0)


def _term(*_):
    _cleanup()
    sys.exit(0)


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, _term)


class dtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


uint8 = dtype("uint8", 1)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)
float32 = dtype("float32", 4)


class device:
    def __init__(self, kind, index=None):
        self.type, self.index = str(kind).split(":")[0], index

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)


class Tensor:
    """Shape, dtype and device only; a tensor whose elements are all one known number (torch.ones,
    fill_, a matmul of two such) keeps that number, so c[0, 0].item() can be checked."""

    def __init__(self, shape, dt, dev, value=None):
        self.shape, self.dtype, self.device, self._value = shape, dt, dev, value

    def fill_(self, value):
        self._value = float(value)
        return self

    def __matmul__(self, other):
        value = None
        if self._value is not None and other._value is not None:
            value = self._value * other._value * int(self.shape[-1])
        return Tensor((self.shape[0], other.shape[-1]), self.dtype, self.device, value)

    def __getitem__(self, _index):
        return Tensor((), self.dtype, self.device, self._value)

    def item(self):
        if self._value is None:
            raise RuntimeError("stand-in torch: the value of this tensor is not known (random or uninitialised)")
        return self._value

    __float__ = item


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _make(shape, dt=None, device=None, value=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dt = dt or float32
    _allocate(_numel(shape) * dt.itemsize, device)
    return Tensor(tuple(shape), dt, device, value)


def empty(*shape, dtype=None, device=None):
    return _make(shape, dtype, device)


def ones(*shape, dtype=None, device=None):
    return _make(shape, dtype, device, 1.0)


def zeros(*shape, dtype=None, device=None):
    return _make(shape, dtype, device, 0.0)


def randn(*shape, dtype=None, device=None):
    return _make(shape, dtype, device)


class _Uuid:
    def __init__(self, text):
        self._text = text[4:] if text.startswith("GPU-") else text
        self.bytes = list(bytes.fromhex(self._text.replace("-", "")))

    def __str__(self):
        return self._text


class _Props:
    def __init__(self, g):
        self.name = g.get("name", "stand-in GPU")
        self.total_memory = g["memory"]["total"]
        self.uuid = _Uuid(g["uuid"])


class cuda:
    @staticmethod
    def is_available():
        return bool(_visible_devices())

    @staticmethod
    def device_count():
        return len(_visible_devices())

    @staticmethod
    def get_device_properties(i):
        vis = _visible_devices()
        if not 0 <= i < len(vis):
            raise RuntimeError("stand-in torch: invalid device ordinal %d" % i)
        return _Props(vis[i])

    @staticmethod
    def synchronize():
        time.sleep(0.02)
