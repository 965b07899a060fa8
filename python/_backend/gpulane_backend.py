"""The package's own PEP 517 build backend: `pip install ./python` builds the wheel with this file
alone, so it needs no download and no build dependency at all (pyproject.toml: requires = []).

With setuptools as the backend, pip's isolated build wanted `setuptools>=61` from an index (an
offline server has none), and without isolation Debian 12's setuptools 66 needed the `wheel`
package. The package is pure Python: a wheel is a zip of its files with three metadata files
(PEP 427, PEP 566), written here; an editable install (PEP 660) is a wheel holding a .pth file.
Metadata comes from pyproject.toml's [project] table (tomllib; a small reader on Python < 3.11).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent  # python/
PACKAGE = "gpulane"
TAG = "py3-none-any"


def _project() -> Dict[str, object]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
        return dict(tomllib.loads(text)["project"])
    except ImportError:
        pass
    # The [project] table's plain keys, as this pyproject.toml writes them: key = "text",
    # key = {text = "..."} and key = [ "a", "b" ] (possibly over several lines).
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.S | re.M)
    body = section.group(1) if section else ""
    project: Dict[str, object] = {}
    for m in re.finditer(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', body, re.M):
        project[m.group(1)] = m.group(2)
    for m in re.finditer(r'^(\w[\w-]*)\s*=\s*\{\s*text\s*=\s*"([^"]*)"\s*\}', body, re.M):
        project[m.group(1)] = {"text": m.group(2)}
    for m in re.finditer(r"^(\w[\w-]*)\s*=\s*\[(.*?)\]", body, re.S | re.M):
        project[m.group(1)] = re.findall(r'"([^"]*)"', m.group(2))
    return project


def _name_version() -> Tuple[str, str]:
    p = _project()
    return str(p["name"]), str(p["version"])


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    for c in p.get("classifiers", []) or []:
        lines.append(f"Classifier: {c}")
    readme = ROOT / str(p.get("readme", "README.md"))
    if readme.is_file():
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n"


def _package_files() -> List[Path]:
    files = []
    for path in sorted((ROOT / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            files.append(path)
    return files


def _dist_info() -> str:
    name, version = _name_version()
    return f"{name}-{version}.dist-info"


def _write_wheel(wheel_directory: str, contents: List[Tuple[str, bytes]]) -> str:
    name, version = _name_version()
    dist_info = _dist_info()
    contents = contents + [
        (f"{dist_info}/METADATA", _metadata().encode("utf-8")),
        (f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: gpulane_backend\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
        (f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = io.StringIO()
    for arcname, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{arcname},sha256={digest},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    filename = f"{name}-{version}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in contents + [(f"{dist_info}/RECORD", record.getvalue().encode())]:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    return filename


# ---- PEP 517 hooks ----------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    dist_info = Path(metadata_directory) / _dist_info()
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata(), encoding="utf-8")
    return dist_info.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    contents = [(path.relative_to(ROOT).as_posix(), path.read_bytes()) for path in _package_files()]
    return _write_wheel(wheel_directory, contents)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    # The installed package is this checkout: a .pth file puts python/ on sys.path.
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", f"{ROOT}\n".encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    name, version = _name_version()
    base = f"{name}-{version}"
    filename = f"{base}.tar.gz"
    files = [ROOT / "pyproject.toml", ROOT / "README.md", Path(__file__).resolve()] + _package_files()
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            if path.is_file():
                tar.add(str(path), arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata().encode("utf-8")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    return filename
