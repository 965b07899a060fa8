"""The parser of ``$GPULANE_AUTO`` (gpulane.auto), importable without leasing."""

from __future__ import annotations

from typing import Any, Dict

from .errors import InvalidRequestError

_ALLOWED = {"n", "min_free", "mem", "max_util", "timeout", "no_wait", "gpus", "share_foreign", "order",
            "partition", "mig", "uuid", "quiet", "check_cuda"}


def parse_options(text: str) -> Dict[str, Any]:
    """``"n=2,min_free=20GiB"`` → ``{"n": 2, "min_free": "20GiB"}``. ``gpus`` takes ``;`` between
    entries (``gpus=0;3``), since ``,`` separates options."""
    options: Dict[str, Any] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in _ALLOWED:
            raise InvalidRequestError(
                f"GPULANE_AUTO: cannot read {part!r}: use key=value pairs of {', '.join(sorted(_ALLOWED))}", 2)
        parsed: Any = value
        if value.lower() in ("true", "yes", "1") and key in ("no_wait", "share_foreign", "uuid", "quiet",
                                                            "check_cuda"):
            parsed = True
        elif value.lower() in ("false", "no", "0") and key in ("no_wait", "share_foreign", "uuid", "quiet",
                                                              "check_cuda"):
            parsed = False
        elif key == "gpus":
            parsed = value.replace(";", ",")
        elif value.isdigit():
            parsed = int(value)
        options[key] = parsed
    return options
