"""Fixtures: an isolated fake machine (fake NVML state from the recorded H200s, a lease directory,
an empty user config, no daemon) that the real gpulane binary runs against.

Paths come from the environment (CTest sets them, tests/CMakeLists.txt):
  GPULANE_TEST_GPULANE        the built gpulane binary
  GPULANE_TEST_FAKE_NVML      the fake libnvidia-ml.so.1 (build/fake_nvml/current/)
  GPULANE_TEST_FIXTURES_DIR   tests/fixtures (default: beside this folder's parent)
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value or not os.path.exists(value):
        pytest.exit(f"{name} must name the built file (got {value!r}); run through ctest", returncode=2)
    return value


def recorded_idle_gpu() -> dict:
    fixtures = Path(os.environ.get("GPULANE_TEST_FIXTURES_DIR", REPO / "tests" / "fixtures"))
    doc = json.loads((fixtures / "h200x2-2026-11-30" / "nvml_snapshot.json").read_text())
    gpu = doc["devices"][0]
    gpu["processes"] = []
    return gpu


def machine_state(count: int) -> dict:
    """`count` idle H200s cloned from the recording (as tests/support/scenarios.cc's CloneGpu)."""
    base = recorded_idle_gpu()
    devices = []
    for i in range(count):
        gpu = copy.deepcopy(base)
        gpu["uuid"] = f"GPU-{0xa0000000 + i:08x}-92ce-068a-58c5-7c2f58de6be6"
        gpu["pci_bus_id"] = f"00000000:{0x10 + i:02X}:00.0"
        gpu["minor"] = i
        gpu.pop("index", None)
        devices.append(gpu)
    return {"driver": "575.57.08", "nvml": "12.575.57.08", "cuda_driver": 12090, "devices": devices}


class FakeMachine:
    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.state = machine_state(count)
        (root / "leases").mkdir()
        os.chmod(root / "leases", 0o1777)
        (root / "config.toml").write_text("")
        self.save()

    def save(self) -> None:
        tmp = self.root / "nvml.json.tmp"
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.root / "nvml.json")

    def env(self) -> Dict[str, str]:
        return {
            "GPULANE_BIN": _required("GPULANE_TEST_GPULANE"),
            "GPULANE_NVML_LIBRARY": _required("GPULANE_TEST_FAKE_NVML"),
            "FAKE_NVML_STATE": str(self.root / "nvml.json"),
            "GPULANE_LEASE_DIR": str(self.root / "leases"),
            "GPULANE_CONFIG": str(self.root / "config.toml"),
            "GPULANE_SOCKET": str(self.root / "gpulane.sock"),
            "GPULANE_STATE_DIR": str(self.root / "state"),
            "GPULANE_SYSTEM_DAEMON": "0",
            "NO_COLOR": "1",
        }

    def uuid(self, index: int) -> str:
        return self.state["devices"][index]["uuid"]

    def leases(self) -> List[str]:
        return sorted(p.name for p in (self.root / "leases").iterdir() if not p.name.startswith("."))


# Variables a test must not inherit from whoever runs it (a gpulane job, a GPU notebook).
_CLEARED = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPULANE_JOB_ID", "GPULANE_GPU_UUIDS",
            "GPULANE_GPU_INDICES", "GPULANE_MEM_BYTES", "GPULANE_LEASE_FD", "GPULANE_AUTO", "GPULANE_DIRECT_NVML")


def _machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> FakeMachine:
    m = FakeMachine(tmp_path, count)
    for key in _CLEARED:
        monkeypatch.delenv(key, raising=False)
    for key, value in m.env().items():
        monkeypatch.setenv(key, value)
    # Child Pythons (spawned workers, helper scripts) import this checkout's package.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PYTHON_DIR)] + ([os.environ["PYTHONPATH"]]
                                                                          if os.environ.get("PYTHONPATH") else [])))
    return m


@pytest.fixture
def machine2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeMachine:
    """Two idle fake H200s."""
    return _machine(tmp_path, monkeypatch, 2)


@pytest.fixture
def machine4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeMachine:
    """Four idle fake H200s."""
    return _machine(tmp_path, monkeypatch, 4)


class Holder:
    """Another Python process that takes `gpulane.lease(**options)`, prints its grant as one JSON
    line, and holds the lease until its stdin closes (no sleeps: the line says it holds it)."""

    SCRIPT = r"""
import json, os, sys
import gpulane
opts = json.loads(sys.argv[1])
try:
    with gpulane.lease(**opts) as gpus:
        print(json.dumps({"indices": gpus.indices, "uuids": gpus.uuids,
                          "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "job": gpus.job_id}), flush=True)
        sys.stdin.read()
except gpulane.GpulaneError as e:
    print(json.dumps({"error": type(e).__name__, "code": e.exit_code, "message": e.message}), flush=True)
"""

    def __init__(self, **options: object) -> None:
        # Another user's program: none of this process's lease (a child would be part of its job).
        env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
        self.proc = subprocess.Popen([sys.executable, "-c", self.SCRIPT, json.dumps(options)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._result: Optional[dict] = None

    def result(self) -> dict:
        if self._result is None:
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            assert line, f"holder exited with {self.proc.wait()} before printing its grant"
            self._result = json.loads(line)
        return self._result

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


@pytest.fixture
def holders():
    started: List[Holder] = []

    def start(**options: object) -> Holder:
        h = Holder(**options)
        started.append(h)
        return h

    yield start
    for h in started:
        if h.proc.poll() is None:
            h.close()
