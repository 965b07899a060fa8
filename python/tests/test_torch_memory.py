"""The PyTorch courtesy of --mem shares (gpulane/_torch_memory.py): gpulane.auto and lease() ask
torch to keep to the declared memory (set_per_process_memory_fraction) when CUDA starts, never
starting CUDA themselves; whole GPUs are left alone. With a stub torch that records its calls."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gpulane

GiB = 1 << 30

STUB_CUDA = textwrap.dedent("""
    import os
    calls = []
    _queued = []
    _initialized = False

    class _Props:
        total_memory = 80 * (1 << 30)

    def is_initialized():
        return _initialized

    def device_count():
        return len([d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d])

    def get_device_properties(device):
        assert _initialized, "asked before CUDA started"
        return _Props()

    def set_per_process_memory_fraction(fraction, device=None):
        assert _initialized, "torch starts CUDA for this call: gpulane must not make it early"
        calls.append([round(fraction, 6), device])

    def _lazy_call(fn):
        if _initialized:
            fn()
        else:
            _queued.append(fn)

    def init():  # what torch's _lazy_init does when the program first uses CUDA
        global _initialized
        _initialized = True
        for fn in _queued:
            fn()
""")


def _stub_torch(root: Path) -> Path:
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("from . import cuda\n")
    (root / "torch" / "cuda.py").write_text(STUB_CUDA)
    return root


def _load_stub(root: Path):
    spec = importlib.util.spec_from_file_location("torch", root / "torch" / "__init__.py",
                                                  submodule_search_locations=[str(root / "torch")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch"] = module
    spec.loader.exec_module(module)
    return module


AUTO_SCRIPT = r"""
import json, gpulane.auto
import torch  # after gpulane.auto, as the README shows
before = list(torch.cuda.calls)
torch.cuda.init()
print(json.dumps({"before": before, "after": torch.cuda.calls}))
"""


def test_auto_in_a_mem_job_limits_torch_when_cuda_starts(machine2, tmp_path):
    stub = _stub_torch(tmp_path / "stub")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stub), os.environ["PYTHONPATH"]]))
    proc = subprocess.run([os.environ["GPULANE_BIN"], "run", "--mem", "10GiB", "--", sys.executable, "-c", AUTO_SCRIPT],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["before"] == [], "nothing before CUDA starts"
    assert got["after"] == [[0.125, 0]], got  # 10 GiB of the stub's 80 GiB, on its one visible GPU


def test_whole_gpu_job_leaves_torch_alone(machine2, tmp_path):
    stub = _stub_torch(tmp_path / "stub")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stub), os.environ["PYTHONPATH"]]))
    proc = subprocess.run([os.environ["GPULANE_BIN"], "run", "-g", "1", "--", sys.executable, "-c", AUTO_SCRIPT],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["after"] == []


def test_lease_with_mem_limits_an_already_imported_torch(machine2, tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    torch = _load_stub(_stub_torch(tmp_path / "stub"))
    try:
        with gpulane.lease(n=1, mem="20GiB") as gpus:
            assert len(gpus) == 1 and torch.cuda.calls == []
            torch.cuda.init()
            assert torch.cuda.calls == [[0.25, 0]]
    finally:
        sys.modules.pop("torch", None)
        sys.modules.pop("torch.cuda", None)
