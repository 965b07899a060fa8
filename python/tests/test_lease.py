"""gpulane.lease() against the real gpulane binary and the fake NVML."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types

import pytest

import gpulane


def test_lease_sets_environment_then_restores_it(machine2, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    with gpulane.lease(n=1) as gpus:
        assert len(gpus) == 1
        gpu = gpus[0]
        assert gpu.uuid == machine2.uuid(gpu.index)
        assert os.environ["CUDA_VISIBLE_DEVICES"] == str(gpu.index)
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert os.environ["GPULANE_JOB_ID"] == f"p{os.getpid()}" == gpus.job_id
        assert not gpus.reused
        held = [g for g in gpulane.status() if g.held_by]
        assert [g.uuid for g in held] == [gpu.uuid]
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert "GPULANE_JOB_ID" not in os.environ
    assert os.environ["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert [g.held_by for g in gpulane.status()] == [None, None]


def test_uuid_option_puts_uuids_in_cuda_visible_devices(machine2):
    with gpulane.lease(n=2, uuid=True) as gpus:
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ",".join(gpus.uuids)
        assert sorted(gpus.uuids) == sorted(machine2.uuid(i) for i in range(2))


def test_two_processes_leasing_at_once_never_share_a_gpu(machine4, holders):
    started = [holders(n=1) for _ in range(4)]  # all four wait and lease at the same time
    got = [h.result() for h in started]
    assert all("error" not in r for r in got), got
    indices = [r["indices"][0] for r in got]
    assert sorted(indices) == [0, 1, 2, 3], got
    assert sorted(r["cvd"] for r in got) == ["0", "1", "2", "3"]
    assert len({r["job"] for r in got}) == 4


def test_no_wait_on_a_full_machine_raises_no_gpu_error(machine2, holders):
    full = holders(n=2)
    assert sorted(full.result()["indices"]) == [0, 1]
    with pytest.raises(gpulane.NoGpuError) as info:
        with gpulane.lease(n=1, no_wait=True, quiet=True):
            pytest.fail("leased a GPU of a full machine")
    assert info.value.exit_code == 5
    assert info.value.message and "\n" not in info.value.message
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_timeout_raises_timeout_error(machine2, holders):
    full = holders(n=2)
    full.result()
    with pytest.raises(gpulane.TimeoutError) as info:
        gpulane.lease(n=1, timeout=0.2, quiet=True).acquire()
    assert info.value.exit_code == 6
    assert isinstance(info.value, TimeoutError)  # the built-in one too


def test_impossible_request_raises_invalid_request_error(machine2):
    with pytest.raises(gpulane.InvalidRequestError) as info:
        gpulane.lease(n=3).acquire()
    assert info.value.exit_code == 2


def test_lease_is_released_after_the_block(machine2, holders):
    with gpulane.lease(n=2) as gpus:
        assert sorted(gpus.indices) == [0, 1]
        assert holders(n=1, no_wait=True).result()["error"] == "NoGpuError"
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


def test_lease_is_released_after_an_exception(machine2, holders):
    with pytest.raises(RuntimeError, match="boom"):
        with gpulane.lease(n=2):
            raise RuntimeError("boom")
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


def test_lease_is_released_after_keyboard_interrupt(machine2, holders):
    with pytest.raises(KeyboardInterrupt):
        with gpulane.lease(n=2):
            raise KeyboardInterrupt
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


class _InterruptOnWaiting:
    """A stand-in for sys.stderr that sends this process SIGINT (Ctrl-C) at the first waiting line."""

    def __init__(self) -> None:
        self.lines = []

    def write(self, text: str) -> int:
        self.lines.append(text)
        if len(self.lines) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return len(text)

    def flush(self) -> None:
        pass


def test_ctrl_c_while_waiting_leaves_the_line(machine2, holders, monkeypatch):
    full = holders(n=2)
    full.result()
    fake_stderr = _InterruptOnWaiting()
    waiting = gpulane.lease(n=2)
    real_stderr, sys.stderr = sys.stderr, fake_stderr
    try:
        with pytest.raises(KeyboardInterrupt):
            waiting.acquire()
    finally:
        sys.stderr = real_stderr
    assert "waiting" in fake_stderr.lines[0]
    assert not waiting.held and "CUDA_VISIBLE_DEVICES" not in os.environ
    # Had the interrupted holder kept waiting, it would take both GPUs the moment `full` ends.
    assert full.close() == 0
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


def _fake_torch(initialised: bool) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: initialised)
    return torch


def test_cuda_already_initialised_is_refused(machine2, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True))
    with pytest.raises(gpulane.CudaAlreadyInitializedError) as info:
        with gpulane.lease(n=1):
            pytest.fail("leased although CUDA was initialised")
    assert "torch.cuda" in str(info.value) and "CUDA_VISIBLE_DEVICES" in str(info.value)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert [g.held_by for g in gpulane.status()] == [None, None]


def test_torch_imported_without_cuda_is_fine(machine2, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(False))
    with gpulane.lease(n=1) as gpus:
        assert len(gpus) == 1


FAKE_CUDA_SCRIPT = r"""
import ctypes, sys, gpulane
cuda = ctypes.CDLL(sys.argv[1])  # libcuda.so.1 mapped, as `import torch` maps it, not initialised
with gpulane.lease(n=1) as gpus:
    print("leased", len(gpus), flush=True)
cuda.cuInit(0)  # what cupy, numba or torch.cuda.is_available() do
try:
    with gpulane.lease(n=1):
        print("leased after cuInit", flush=True)
except gpulane.CudaAlreadyInitializedError as e:
    print("refused:", e, flush=True)
"""


def test_cuda_driver_loaded_is_fine_but_initialised_is_refused(machine2, tmp_path):
    fake = os.environ.get("GPULANE_TEST_FAKE_CUDA")
    assert fake and os.path.exists(fake), "GPULANE_TEST_FAKE_CUDA names the fake libcuda.so.1 (tests/fake_cuda)"
    script = tmp_path / "fake_cuda.py"
    script.write_text(FAKE_CUDA_SCRIPT)
    out = subprocess.run([sys.executable, str(script), fake], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    lines = out.stdout.splitlines()
    assert lines[:1] == ["leased 1"], out.stdout + out.stderr
    assert len(lines) == 2 and lines[1].startswith("refused: the CUDA driver is already initialised"), out.stdout + out.stderr


def test_missing_binary_raises_binary_not_found(machine2, monkeypatch, tmp_path):
    monkeypatch.setenv("GPULANE_BIN", str(tmp_path / "no-such-gpulane"))
    with pytest.raises(gpulane.BinaryNotFoundError):
        gpulane.lease(n=1).acquire()


JOB_SCRIPT = r"""
import json, os, gpulane
outer = os.environ["CUDA_VISIBLE_DEVICES"]
with gpulane.lease(n=1, no_wait=True) as gpus:
    inside = os.environ["CUDA_VISIBLE_DEVICES"]
    leases = sorted(os.listdir(os.environ["GPULANE_LEASE_DIR"]))
print(json.dumps({"outer": outer, "inside": inside, "after": os.environ["CUDA_VISIBLE_DEVICES"],
                  "reused": gpus.reused, "indices": gpus.indices, "uuids": gpus.uuids,
                  "job": gpus.job_id, "env_job": os.environ["GPULANE_JOB_ID"], "leases": leases}))
"""


def test_inside_a_gpulane_job_the_jobs_gpus_are_used(machine2):
    # The job holds both GPUs: a new lease (even with no_wait) could only fail. lease(n=1) gets the
    # first of them, as `run -g 1` would give one, and the job's two again after the block.
    proc = subprocess.run([os.environ["GPULANE_BIN"], "run", "-g", "2", "--", sys.executable, "-c", JOB_SCRIPT],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["reused"] is True
    assert got["outer"] == got["after"] == "0,1"
    assert got["inside"] == "0"
    assert got["indices"] == [0]
    assert got["uuids"] == [machine2.uuid(0)]
    assert got["job"] == got["env_job"] and got["job"].startswith("r")
    assert len([n for n in got["leases"] if not n.startswith(".")]) == 1, got["leases"]  # the job's own


def test_nested_lease_in_the_same_process_reuses_the_outer_one(machine2):
    with gpulane.lease(n=2) as outer:
        with gpulane.lease(n=1, no_wait=True) as inner:
            assert inner.reused and inner.uuids == outer.uuids[:1]
            assert os.environ["CUDA_VISIBLE_DEVICES"] == str(outer.indices[0])
            assert os.environ["GPULANE_GPU_UUIDS"] == outer.uuids[0]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ",".join(str(i) for i in outer.indices)
        with gpulane.lease(n=2, no_wait=True) as same:
            assert same.reused and same.uuids == outer.uuids
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def _signal_pending(pid: int, signals: tuple) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f)
    except OSError:
        return False
    if fields["State"].strip().startswith("Z"):
        return False
    mask = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    return any(mask & (1 << (s - 1)) for s in signals)


def test_a_lease_taken_in_a_thread_outlives_the_thread(machine2, holders):
    import threading
    import time

    box = {}

    def take() -> None:
        box["tid"] = threading.get_native_id()
        box["lease"] = gpulane.lease(n=2)
        box["gpus"] = box["lease"].acquire()

    worker = threading.Thread(target=take)
    worker.start()
    worker.join()
    holder = box["lease"]._proc
    try:
        # The kernel sends the parent-death signal when the thread is finished (its task gone);
        # wait until then and until the holder has taken it (polling a condition, not a guess).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
                os.path.exists(f"/proc/self/task/{box['tid']}")
                or _signal_pending(holder.pid, (signal.SIGUSR2, signal.SIGTERM))):
            time.sleep(0.005)
        assert holder.poll() is None, "the lease ended with the thread that took it"
        assert holders(n=1, no_wait=True).result()["error"] == "NoGpuError"
    finally:
        box["lease"].release()
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


def test_an_error_is_printed_once(machine2, capfd):
    """The binary's error line was forwarded to stderr AND carried by the exception, so a script
    that let it propagate showed it twice. It is the exception's alone now."""
    with pytest.raises(gpulane.InvalidRequestError) as info:
        with gpulane.lease(n=9):  # more GPUs than the machine has: exit 2
            pytest.fail("leased 9 of 2 GPUs")
    err = capfd.readouterr().err
    assert info.value.message, info.value
    assert info.value.message not in err, f"printed before the exception carried it: {err!r}"
    shown = err + str(info.value)
    assert shown.count(info.value.message) == 1, shown


TIME_LIMIT_SCRIPT = """
import time, gpulane
with gpulane.lease(n=1, time_limit="1s"):
    time.sleep(60)
print("survived")
"""


def test_a_lease_with_a_time_limit_stops_its_process_when_it_is_over(machine2):
    # Issue 23, item 9: the lease's own side (gpulane _lease) stops the process at its limit.
    proc = subprocess.run([sys.executable, "-c", TIME_LIMIT_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, proc.stderr)
    assert "survived" not in proc.stdout  # (the package reads _lease's stderr: nobody is left to show its line)
