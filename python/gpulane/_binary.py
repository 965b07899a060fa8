"""Finding and running the ``gpulane`` binary; request options as its command-line arguments."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Iterable, List, Optional, Sequence, Union

from .errors import BinaryNotFoundError, InvalidRequestError, error_for

Size = Union[int, str]
Duration = Union[int, float, str]


def find_binary() -> str:
    """The gpulane binary: ``$GPULANE_BIN`` when set, else ``gpulane`` on ``PATH``.

    Raises:
        BinaryNotFoundError: neither names an executable file.
    """
    explicit = os.environ.get("GPULANE_BIN")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise BinaryNotFoundError(f"GPULANE_BIN={explicit} is not an executable file")
    found = shutil.which("gpulane")
    if not found:
        raise BinaryNotFoundError(
            "no gpulane binary on PATH: install gpulane (sudo cmake --install build) or set GPULANE_BIN")
    return found


def size_arg(name: str, value: Size) -> str:
    """A size for the binary: an int is bytes ("…B"), a str is passed as written ("20GiB")."""
    if isinstance(value, bool):
        raise InvalidRequestError(f"{name}: expected bytes (int) or a size such as '20GiB', got {value!r}", 2)
    if isinstance(value, int):
        if value < 0:
            raise InvalidRequestError(f"{name}: negative size {value}", 2)
        return f"{value}B"
    if isinstance(value, str):
        return value
    raise InvalidRequestError(f"{name}: expected bytes (int) or a size such as '20GiB', got {value!r}", 2)


def duration_arg(name: str, value: Duration) -> str:
    """A duration for the binary: a number is seconds, a str is passed as written ("1h30m")."""
    if isinstance(value, bool):
        raise InvalidRequestError(f"{name}: expected seconds or a duration such as '10m', got {value!r}", 2)
    if isinstance(value, (int, float)):
        if value < 0:
            raise InvalidRequestError(f"{name}: negative duration {value}", 2)
        return f"{value:g}s" if isinstance(value, float) else f"{value}s"
    if isinstance(value, str):
        return value
    raise InvalidRequestError(f"{name}: expected seconds or a duration such as '10m', got {value!r}", 2)


# The binary's options and the keywords that set them: its messages name the option
# ("a smaller --min-free"), a Python caller is told the keyword ("a smaller min_free").
KEYWORD_OF_OPTION = {
    "--min-free": "min_free", "--mem": "mem", "--max-util": "max_util", "--gpus": "gpus",
    "--share-foreign": "share_foreign", "--order": "order", "--partition": "partition", "--mig": "mig",
    "--timeout": "timeout", "--time-limit": "time_limit", "--no-wait": "no_wait", "--uuid": "uuid",
}
_OPTION = re.compile(r"(?<![\w-])(" + "|".join(re.escape(o) for o in KEYWORD_OF_OPTION) + r")(?![\w-])")


def in_python_terms(message: str) -> str:
    """``message`` with the binary's option names replaced by the keywords that set them."""
    return _OPTION.sub(lambda m: KEYWORD_OF_OPTION[m.group(1)], message)


def request_args(
    n: int = 1,
    *,
    min_free: Optional[Size] = None,
    mem: Optional[Size] = None,
    max_util: Optional[int] = None,
    gpus: Optional[Union[str, Iterable[Union[int, str]]]] = None,
    share_foreign: bool = False,
    order: Optional[str] = None,
    partition: Optional[str] = None,
    mig: Optional[str] = None,
) -> List[str]:
    """The options shared by ``pick`` and ``_lease`` (the binary's request options)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidRequestError(f"n: expected a number of GPUs (int), got {n!r}", 2)
    args = ["-g", str(n)]
    if min_free is not None:
        args += ["--min-free", size_arg("min_free", min_free)]
    if mem is not None:
        args += ["--mem", size_arg("mem", mem)]
    if max_util is not None:
        args += ["--max-util", str(int(max_util))]
    if gpus is not None:
        text = gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)
        args += ["--gpus", text]
    if share_foreign:
        args.append("--share-foreign")
    if order is not None:
        args += ["--order", order]
    if partition is not None:
        args += ["--partition", partition]
    if mig is not None:
        args += ["--mig", mig]
    return args


def run_binary(args: Sequence[str], what: str) -> str:
    """Runs ``gpulane ARGS`` to its end and returns its stdout.

    Raises:
        GpulaneError (a subclass by exit code) with the binary's message when it fails.
    """
    proc = subprocess.run([find_binary(), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise error_for(proc.returncode, in_python_terms(proc.stderr), what)
    return proc.stdout
