"""``gpulane.worker_pool()`` and ``gpulane.spawn()``: processes that each hold their own lease."""

from __future__ import annotations

import multiprocessing
import warnings
from multiprocessing.pool import Pool
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from ._lease import Lease, LeasedGpus, _job_gpus_from_env
from .errors import GpulaneError

# The lease a worker process holds for its whole life (released when the process ends: the
# holder sees its stdin close).
_worker_lease: Optional[Lease] = None


def worker_gpus() -> Optional[LeasedGpus]:
    """In a process of :func:`worker_pool` or :func:`spawn`: the GPUs it holds; else None."""
    return _worker_lease.gpus if _worker_lease is not None else None


def _hold_for_process(gpus: int, lease_options: Dict[str, Any]) -> None:
    global _worker_lease
    lease = Lease(gpus, **{**lease_options, "reuse_job": False})
    lease.acquire()
    _worker_lease = lease


def _leasable_gpu_count(lease_options: Dict[str, Any]) -> Optional[int]:
    """How many GPUs the workers lease among: the enclosing job's, the ``gpus`` named, or the
    machine's; None when that is not known (no driver, no binary)."""
    job = _job_gpus_from_env()
    if job is not None:
        return len(job.uuids)
    named = lease_options.get("gpus")
    if named is not None:
        return len([g for g in named.split(",") if g.strip()]) if isinstance(named, str) else len(list(named))
    from ._status import status  # here: status imports the package's binary helpers
    try:
        return len(status())
    except GpulaneError:
        return None


def _warn_if_workers_must_wait(processes: int, gpus_per_worker: int, lease_options: Dict[str, Any]) -> None:
    count = _leasable_gpu_count(lease_options)
    if count is None or processes * gpus_per_worker <= count:
        return
    fit = count // gpus_per_worker
    warnings.warn(
        f"worker_pool: {processes} workers of {gpus_per_worker} GPU(s) each need {processes * gpus_per_worker} "
        f"GPUs but {count} can be leased here: {processes - fit} of them will wait in line, holding their "
        f"place, until GPUs free up; processes={fit} uses what there is", RuntimeWarning, stacklevel=3)


def _worker_init(gpus: int, lease_options: Dict[str, Any], initializer: Optional[Callable[..., object]],
                 initargs: Tuple[Any, ...]) -> None:
    _hold_for_process(gpus, lease_options)
    if initializer is not None:
        initializer(*initargs)


def worker_pool(
    processes: int = 4,
    gpus_per_worker: int = 1,
    initializer: Optional[Callable[..., object]] = None,
    initargs: Iterable[Any] = (),
    maxtasksperchild: Optional[int] = None,
    **lease_options: Any,
) -> Pool:
    """A ``multiprocessing`` Pool whose workers each hold a lease of their own.

    Workers are started with the ``spawn`` context (a fresh interpreter: no CUDA state inherited).
    Each worker's initializer takes a lease of ``gpus_per_worker`` GPUs (``lease_options`` as for
    :func:`lease`: ``min_free``, ``mem``, ``max_util``, ``timeout``, ``no_wait``, ...), waiting in
    line like ``gpulane run``, so the worker sees only its GPUs (``cuda:0`` is its first), then runs
    ``initializer(*initargs)``. The lease lasts as long as the worker process. Inside a gpulane
    job (or an enclosing ``lease()``) the workers lease among the job's GPUs.

    More workers than there are GPUs to lease among (the enclosing job's, ``gpus``, or the machine's)
    is warned of (RuntimeWarning): the extra workers would wait in line until GPUs free up.

    A worker whose lease fails (no_wait on a busy machine, a timeout) dies in its initializer and
    multiprocessing starts another in its place: prefer waiting leases, or check with
    :func:`pick` first.
    """
    _warn_if_workers_must_wait(processes, gpus_per_worker, lease_options)
    ctx = multiprocessing.get_context("spawn")
    return ctx.Pool(processes, _worker_init, (gpus_per_worker, dict(lease_options), initializer, tuple(initargs)),
                    maxtasksperchild)


def _run_with_lease(target: Callable[..., object], args: Tuple[Any, ...], kwargs: Dict[str, Any], gpus: int,
                    lease_options: Dict[str, Any]) -> None:
    _hold_for_process(gpus, lease_options)
    try:
        target(*args, **kwargs)
    finally:
        if _worker_lease is not None:
            _worker_lease.release()


def spawn(
    target: Callable[..., object],
    args: Iterable[Any] = (),
    kwargs: Optional[Dict[str, Any]] = None,
    gpus: int = 1,
    name: Optional[str] = None,
    daemon: Optional[bool] = None,
    **lease_options: Any,
) -> BaseProcess:
    """Starts ``target(*args, **kwargs)`` in a new process (``spawn`` context) that first leases
    ``gpus`` GPUs (``lease_options`` as for :func:`lease`) and sees only them; the lease is given
    back when ``target`` returns. Returns the started Process (``join()`` it; a failed lease
    makes the process exit with status 1 and its traceback on stderr)."""
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_run_with_lease, name=name, daemon=daemon,
                       args=(target, tuple(args), dict(kwargs or {}), gpus, dict(lease_options)))
    proc.start()
    return proc
