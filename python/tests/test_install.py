"""`pip install ./python`, as the README writes it, offline, with Debian 12's own python3 and pip.

With setuptools as the build backend, pip's isolated build fetched `setuptools>=61` from an index
(an offline server has none), and without isolation Debian's setuptools 66 needed the `wheel`
package, which a fresh venv lacks. The package builds with its own backend now (pyproject.toml).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
DEBIAN_PYTHON = "/usr/bin/python3"


def _debian_python_with_venv() -> str:
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        pytest.skip(f"no {DEBIAN_PYTHON}")
    probe = subprocess.run([DEBIAN_PYTHON, "-c", "import ensurepip, venv"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{DEBIAN_PYTHON} has no venv with pip (Debian: python3-venv)")
    return DEBIAN_PYTHON


def test_pip_install_works_offline_in_a_fresh_venv_without_wheel(tmp_path):
    python = _debian_python_with_venv()
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = venv / "bin" / "pip"
    # The venv is fresh: no `wheel`, and nothing can be downloaded (no index, no proxy).
    assert subprocess.run([str(venv / "bin" / "python"), "-c", "import wheel"], capture_output=True).returncode != 0
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update({"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "https_proxy": "http://127.0.0.1:9",
                "http_proxy": "http://127.0.0.1:9"})
    before = sorted(p.name for p in PYTHON_DIR.iterdir())
    out = subprocess.run([str(pip), "install", str(PYTHON_DIR)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    shown = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import gpulane, importlib.metadata as m; print(gpulane.__file__); print(m.version('gpulane'))"],
                           capture_output=True, text=True, cwd=str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    where, version = shown.stdout.split()
    assert str(venv) in where, where
    assert version == "0.1.0"
    # Nothing written into the checkout (setuptools left build/ and gpulane.egg-info there).
    assert sorted(p.name for p in PYTHON_DIR.iterdir()) == before
