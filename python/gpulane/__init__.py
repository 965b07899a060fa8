"""gpulane for Python: lease GPUs of a shared multi-GPU Linux server in the same line as
``gpulane run`` (no two jobs share a GPU by accident).

- :func:`lease`: ``with gpulane.lease(n=1, min_free="20GiB") as gpus:`` holds GPUs for this
  process and sets ``CUDA_VISIBLE_DEVICES`` while the block runs.
- ``import gpulane.auto``: hold GPUs for the life of the process (``$GPULANE_AUTO``).
- :func:`worker_pool`, :func:`spawn`: processes that each hold their own GPUs.
- :func:`pick`, :func:`status`: which GPUs are free now; every GPU (``gpulane status --json``).

Everything goes through the ``gpulane`` binary (``$GPULANE_BIN``, else ``PATH``); errors are
:class:`GpulaneError` subclasses carrying its message and exit code.
"""

from ._lease import Lease, LeasedGpu, LeasedGpus, cuda_initialized_reason, lease
from ._pool import spawn, worker_gpus, worker_pool
from ._status import Gpu, MigDevice, NvlinkPeer, Process, pick, status
from ._binary import find_binary
from .errors import (BinaryNotFoundError, CudaAlreadyInitializedError, GpulaneError, StoppedError,
                     InvalidRequestError, NoDriverError, NoGpuError, NvmlError, TimeoutError, UnsafeError)

__version__ = "0.1.0"

# TimeoutError is gpulane.TimeoutError (a subclass of the built-in one), left out of __all__ so that
# `from gpulane import *` does not shadow the built-in.

__all__ = [
    "BinaryNotFoundError", "CudaAlreadyInitializedError", "Gpu", "GpulaneError", "StoppedError",
    "InvalidRequestError", "Lease", "LeasedGpu", "LeasedGpus", "MigDevice", "NoDriverError", "NoGpuError",
    "NvlinkPeer", "NvmlError", "Process", "UnsafeError", "cuda_initialized_reason",
    "find_binary", "lease", "pick", "spawn", "status", "worker_gpus", "worker_pool",
]
