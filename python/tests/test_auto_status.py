"""import gpulane.auto, gpulane.status(), gpulane.pick(), and installing the package offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpulane

AUTO_SCRIPT = r"""
import json, os, sys
import gpulane.auto
print(json.dumps({"cvd": os.environ["CUDA_VISIBLE_DEVICES"], "uuids": gpulane.auto.gpus.uuids}), flush=True)
sys.stdin.read()
"""


def test_import_auto_holds_gpus_until_the_process_exits(machine2, holders, monkeypatch):
    monkeypatch.setenv("GPULANE_AUTO", "n=2,min_free=1GiB")
    proc = subprocess.Popen([sys.executable, "-c", AUTO_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        got = json.loads(proc.stdout.readline())
        assert got["cvd"] == "0,1"
        assert sorted(got["uuids"]) == sorted(machine2.uuid(i) for i in range(2))
        assert holders(n=1, no_wait=True).result()["error"] == "NoGpuError"
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        proc.stdout.close()
    after = holders(n=2, no_wait=True).result()
    assert sorted(after.get("indices", [])) == [0, 1], after


def test_auto_options_that_do_not_parse_fail_the_import(machine2, monkeypatch):
    monkeypatch.setenv("GPULANE_AUTO", "n=2,bogus")
    proc = subprocess.run([sys.executable, "-c", "import gpulane.auto"], stderr=subprocess.PIPE, text=True)
    assert proc.returncode != 0
    assert "InvalidRequestError" in proc.stderr and "bogus" in proc.stderr


def test_auto_parse_options():
    from gpulane._auto import parse_options  # the parser, without leasing

    assert parse_options("n=2, min_free=20GiB,no_wait=true,gpus=0;3") == {
        "n": 2, "min_free": "20GiB", "no_wait": True, "gpus": "0,3"}


def test_status_returns_typed_gpus(machine2):
    gpus = gpulane.status()
    assert [g.index for g in gpus] == [0, 1]
    assert [g.uuid for g in gpus] == [machine2.uuid(0), machine2.uuid(1)]
    g = gpus[0]
    assert isinstance(g, gpulane.Gpu)
    assert g.name == "NVIDIA H200" and g.state == "ok" and g.processes == []
    assert g.memory_total_bytes == machine2.state["devices"][0]["memory"]["total"]
    assert g.memory_free_bytes == machine2.state["devices"][0]["memory"]["free"]


def test_status_sees_processes(machine2):
    machine2.state["devices"][1]["processes"] = [{"pid": os.getpid(), "used_memory": 1 << 30}]
    machine2.save()
    procs = gpulane.status()[1].processes
    assert procs is not None and [(p.pid, p.used_memory_bytes) for p in procs] == [(os.getpid(), 1 << 30)]


def test_pick_chooses_free_gpus_and_leaves_leased_ones(machine4, holders):
    assert sorted(gpulane.pick(n=4, min_free=None)) == ["0", "1", "2", "3"]
    held = holders(n=3).result()["indices"]
    free = [str(i) for i in range(4) if i not in held]
    assert gpulane.pick(n=1) == free
    assert gpulane.pick(n=1, uuid=True) == [machine4.uuid(int(free[0]))]
    with pytest.raises(gpulane.NoGpuError) as info:
        gpulane.pick(n=2)
    assert info.value.exit_code == 5


def test_pick_min_free_is_a_size(machine2):
    with pytest.raises(gpulane.InvalidRequestError) as info:
        gpulane.pick(n=1, min_free="1000TiB")
    assert len(gpulane.pick(n=1, min_free=1 << 30)) == 1
    # A Python caller is told the keyword it passed, not the binary's option.
    assert "or a smaller min_free" in info.value.message and "--min-free" not in info.value.message


def test_errors_name_the_keywords_a_python_caller_passed(machine2):
    with pytest.raises(gpulane.InvalidRequestError) as info:
        gpulane.pick(n=1, max_util=101)
    assert info.value.message.startswith("error: max_util: "), info.value.message
    with pytest.raises(gpulane.InvalidRequestError) as info:
        gpulane.pick(n=3)  # two GPUs here: fewer helps, a smaller minimum would not
    assert info.value.message.endswith("can ever qualify: ask for fewer"), info.value.message


def _copy_package(tmp_path: Path) -> Path:
    src = Path(__file__).resolve().parent.parent
    dst = tmp_path / "src"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    return dst


def test_installs_offline_with_pip_target(tmp_path):
    src = _copy_package(tmp_path)
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                           "--target", str(target), str(src)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    assert proc.returncode == 0, proc.stdout
    assert (target / "gpulane" / "py.typed").is_file()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run([sys.executable, "-c", "import gpulane, gpulane.errors; print(gpulane.__file__)"],
                         env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True, check=True).stdout
    assert out.strip() == str(target / "gpulane" / "__init__.py")
