"""Exceptions raised by the gpulane package.

Every error of the ``gpulane`` binary becomes a :class:`GpulaneError` (or a subclass chosen by
its exit code, docs/exit-codes.md) carrying the binary's one-line message and exit code.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Type


class GpulaneError(Exception):
    """A gpulane command failed.

    Attributes:
        message: the binary's one-line error message (``gpulane: `` prefix removed).
        exit_code: the binary's exit status (docs/exit-codes.md), or ``None`` when no binary ran.
    """

    def __init__(self, message: str, exit_code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        if self.exit_code is None:
            return self.message
        return f"{self.message} (gpulane exit code {self.exit_code})"


class BinaryNotFoundError(GpulaneError, FileNotFoundError):
    """No ``gpulane`` binary: neither ``$GPULANE_BIN`` nor ``PATH`` names one."""


class InvalidRequestError(GpulaneError, ValueError):
    """Exit 2: a bad option value, or a request these GPUs can never meet."""


class NoDriverError(GpulaneError):
    """Exit 3: no NVIDIA driver (``libnvidia-ml.so.1`` could not be loaded)."""


class NvmlError(GpulaneError):
    """Exit 4: NVML failed (driver not loaded, version mismatch, no permission)."""


class NoGpuError(GpulaneError):
    """Exit 5: too few GPUs free now (``pick``, ``lease(no_wait=True)``)."""


class TimeoutError(GpulaneError, builtins.TimeoutError):  # noqa: A001 - gpulane.TimeoutError by design
    """Exit 6: the ``timeout`` ran out before the GPUs were free.

    Also a subclass of the built-in ``TimeoutError``.
    """


class UnsafeError(GpulaneError):
    """Exit 7: the lease directory or the daemon's socket is unsafe to use."""


class StoppedError(GpulaneError):
    """The binary was stopped by a signal (SIGINT, SIGTERM, SIGHUP) while waiting."""


class CudaAlreadyInitializedError(GpulaneError, RuntimeError):
    """CUDA is already initialised in this process, so setting ``CUDA_VISIBLE_DEVICES`` now would
    change nothing: the process would keep seeing (and using) every GPU, leased or not."""


_BY_CODE: Dict[int, Type[GpulaneError]] = {
    2: InvalidRequestError,
    3: NoDriverError,
    4: NvmlError,
    5: NoGpuError,
    6: TimeoutError,
    7: UnsafeError,
}


def error_for(exit_code: int, stderr_text: str, what: str) -> GpulaneError:
    """The exception for a gpulane process that exited with ``exit_code`` after printing
    ``stderr_text``; ``what`` names the command for an empty message."""
    lines = [line for line in stderr_text.splitlines() if line.strip()]
    message = lines[-1].strip() if lines else ""
    if message.startswith("gpulane: "):
        message = message[len("gpulane: "):]
    if exit_code < 0 or exit_code >= 128:
        sig = -exit_code if exit_code < 0 else exit_code - 128
        return StoppedError(message or f"{what} was stopped by signal {sig}", exit_code)
    if not message:
        message = f"{what} failed"
    return _BY_CODE.get(exit_code, GpulaneError)(message, exit_code)
