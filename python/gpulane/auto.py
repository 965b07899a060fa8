"""``import gpulane.auto``: lease GPUs for the life of this process.

Options come from ``$GPULANE_AUTO``, comma-separated ``key=value`` pairs of :func:`gpulane.lease`'s
options, e.g. ``GPULANE_AUTO="n=2,min_free=20GiB,timeout=1h"`` (numbers are read as numbers,
``true``/``false`` as booleans; empty or unset: one whole GPU). Importing waits in line like
``gpulane run``, sets ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and the lease
is given back when the interpreter exits (atexit; if the process is killed, the holder notices).
Inside a gpulane job the job's GPUs are used as they are. Import it before anything starts CUDA.

``gpulane.auto.gpus`` holds the :class:`gpulane.LeasedGpus`. Errors are raised from the import
(a :class:`gpulane.GpulaneError`).
"""

from __future__ import annotations

import atexit
import os
from ._auto import parse_options
from ._lease import Lease, LeasedGpus

_lease = Lease(**parse_options(os.environ.get("GPULANE_AUTO", "")))
gpus: LeasedGpus = _lease.acquire()
atexit.register(_lease.release)
