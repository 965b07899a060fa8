"""Functions the spawned pool workers and processes run (importable by name in a fresh interpreter)."""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple

_barrier: Optional[Any] = None


def set_barrier(barrier: Any) -> None:
    global _barrier
    _barrier = barrier


def where_am_i(_: int) -> Tuple[int, str, str]:
    """Waits until every worker runs a task (so each task is another worker's), then says which
    process it is and which GPUs it sees."""
    assert _barrier is not None
    _barrier.wait(timeout=120)
    import gpulane

    held = gpulane.worker_gpus()
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), ",".join(held.uuids) if held else ""


def report(queue: Any, barrier: Optional[Any] = None) -> None:
    """Puts what this process sees on `queue`, then (with `barrier`) holds its lease until every
    process has reported."""
    import gpulane

    held = gpulane.worker_gpus()
    queue.put((os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), held.uuids if held else []))
    if barrier is not None:
        barrier.wait(timeout=120)
