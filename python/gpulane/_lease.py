"""``gpulane.lease()``: hold GPUs for this process through ``gpulane _lease``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import IO, Any, Dict, Iterable, List, Optional, Union

from ._torch_memory import limit_torch_memory
from ._binary import Duration, Size, duration_arg, find_binary, in_python_terms, request_args
from .errors import CudaAlreadyInitializedError, GpulaneError, InvalidRequestError, error_for

_UNSET = object()
# Leases held now: a Lease nobody references any more still holds its GPUs (its pipe stays open)
# until release() or the end of the process.
_held: "set[Lease]" = set()


@dataclass(frozen=True)
class LeasedGpu:
    """One leased GPU.

    Attributes:
        index: the GPU's index on the machine in PCI bus order (``gpulane status``/``pick``'s
            number). Inside the lease CUDA numbers the leased GPUs 0, 1, ... in list order.
        uuid: ``"GPU-…"`` (``"MIG-…"`` for a MIG device); ``""`` when unknown.
    """

    index: int
    uuid: str


class LeasedGpus(List[LeasedGpu]):
    """The leased GPUs (a list of :class:`LeasedGpu`, in CUDA's order inside the lease).

    Attributes:
        job_id: the lease's gpulane job id (``"p<pid>"``; the enclosing job's id when reused).
        env: the variables set for the process while the lease is held.
        reused: True when this process runs inside a gpulane job and its GPUs were reused.
    """

    def __init__(self, gpus: Iterable[LeasedGpu], job_id: str, env: Dict[str, str], reused: bool) -> None:
        super().__init__(gpus)
        self.job_id = job_id
        self.env = dict(env)
        self.reused = reused

    @property
    def indices(self) -> List[int]:
        """The machine indices (PCI bus order)."""
        return [g.index for g in self]

    @property
    def uuids(self) -> List[str]:
        """The UUIDs."""
        return [g.uuid for g in self]


def cuda_initialized_reason() -> Optional[str]:
    """Why CUDA looks initialised in this process already, or None.

    Cheap checks only, importing nothing: ``torch.cuda.is_initialized()`` when torch is imported;
    jax's backends when jax created a GPU backend; the CUDA driver initialised in this process
    (cupy, numba, TensorFlow, or ``torch.cuda.is_available()``, which initialises the driver
    without torch calling itself initialised): _cuda_driver_initialized.
    """
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    is_init = getattr(cuda, "is_initialized", None)
    if callable(is_init):
        try:
            if is_init():
                return "torch.cuda is already initialised (torch.cuda.is_initialized() is True)"
        except Exception:  # a broken or partial torch: leave it to the other checks
            pass
    bridge = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(bridge, "_backends", None) if bridge is not None else None
    if isinstance(backends, dict) and any(k in ("cuda", "gpu", "rocm") for k in backends):
        return "jax has already created its GPU backend"
    if _cuda_driver_initialized():
        return "the CUDA driver is already initialised in this process (cuInit was called)"
    return None


def _cuda_driver_initialized() -> bool:
    """Whether cuInit has run in this process (cupy, numba, TensorFlow, ``torch.cuda.is_available()``).

    Loading libcuda.so is not enough: ``import torch`` maps it without initialising it (seen on an
    H200 machine with PyTorch, docs/validation). Only when the library is already mapped, its
    ``cuDeviceGetCount`` is asked through the handle the process holds (dlopen of a loaded library
    loads and initialises nothing): before cuInit every driver call but cuInit and
    cuDriverGetVersion returns CUDA_ERROR_NOT_INITIALIZED (3) (CUDA Driver API, "Initialization").
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            path = next((line.split()[-1] for line in maps if "/libcuda.so" in line), None)
    except OSError:
        return False
    if path is None:
        return False
    try:
        import ctypes

        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
        count = ctypes.c_int(0)
        return lib.cuDeviceGetCount(ctypes.byref(count)) == 0
    except (OSError, AttributeError):
        return True  # mapped but not askable: assume the worst, as before


def _check_cuda_not_initialized() -> None:
    reason = cuda_initialized_reason()
    if reason:
        raise CudaAlreadyInitializedError(
            f"{reason}: CUDA reads CUDA_VISIBLE_DEVICES once, when it initialises, so setting it now would "
            "change nothing and this process would keep using every GPU, leased or not. Take the lease "
            "before CUDA starts (in Jupyter: restart the kernel and call gpulane.lease() before any "
            "torch.cuda / cupy / jax GPU call), or run the whole program under `gpulane run`.")


def _job_gpus_from_env() -> Optional[LeasedGpus]:
    """The enclosing gpulane job's GPUs when this process runs inside one, else None."""
    job = os.environ.get("GPULANE_JOB_ID")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not job or visible is None:
        return None
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    indices = [e for e in os.environ.get("GPULANE_GPU_INDICES", "").split(",") if e.strip()]
    uuids = [e for e in os.environ.get("GPULANE_GPU_UUIDS", "").split(",") if e.strip()]
    gpus = []
    for i, entry in enumerate(entries):
        if i < len(indices) and indices[i].strip().isdigit():
            index = int(indices[i])
        elif entry.isdigit():
            index = int(entry)
        else:
            index = -1
        uuid = uuids[i].strip() if i < len(uuids) else (entry if not entry.isdigit() else "")
        gpus.append(LeasedGpu(index, uuid))
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPULANE_JOB_ID", "GPULANE_GPU_UUIDS",
            "GPULANE_GPU_INDICES", "GPULANE_MEM_BYTES")
    return LeasedGpus(gpus, job, {k: os.environ[k] for k in keys if k in os.environ}, reused=True)


def _first_of_job(job: LeasedGpus, n: int) -> LeasedGpus:
    """The first `n` of an enclosing job's GPUs, with the job's variables narrowed to them."""
    env = dict(job.env)
    for key in ("CUDA_VISIBLE_DEVICES", "GPULANE_GPU_UUIDS", "GPULANE_GPU_INDICES"):
        if key in env:
            env[key] = ",".join([e.strip() for e in env[key].split(",") if e.strip()][:n])
    return LeasedGpus(job[:n], job.job_id, env, reused=True)


class Lease:
    """GPUs held for this process (and its children) while the lease is held.

    Use as a context manager (``with gpulane.lease(...) as gpus:``), or call :meth:`acquire` and
    :meth:`release`. See :func:`lease` for the options.
    """

    def __init__(
        self,
        n: int = 1,
        *,
        min_free: Optional[Size] = None,
        mem: Optional[Size] = None,
        max_util: Optional[int] = None,
        timeout: Optional[Duration] = None,
        no_wait: bool = False,
        gpus: Optional[Union[str, Iterable[Union[int, str]]]] = None,
        share_foreign: bool = False,
        order: Optional[str] = None,
        partition: Optional[str] = None,
        mig: Optional[str] = None,
        uuid: bool = False,
        quiet: bool = False,
        check_cuda: bool = True,
        reuse_job: bool = True,
        time_limit: Optional[Duration] = None,
    ) -> None:
        self._args = ["_lease", *request_args(n, min_free=min_free, mem=mem, max_util=max_util, gpus=gpus,
                                              share_foreign=share_foreign, order=order, partition=partition,
                                              mig=mig)]
        if timeout is not None:
            self._args += ["--timeout", duration_arg("timeout", timeout)]
        if time_limit is not None:
            self._args += ["--time-limit", duration_arg("time_limit", time_limit)]
        if no_wait:
            self._args.append("--no-wait")
        if uuid:
            self._args.append("--uuid")
        if quiet:
            self._args.append("-q")
        self._n = n
        self._quiet = quiet
        self._check_cuda = check_cuda
        self._reuse_job = reuse_job
        self._proc: Optional[subprocess.Popen] = None
        self._stderr_thread: Optional[threading.Thread] = None
        self._stderr_lines: List[str] = []
        self._saved_env: Dict[str, Any] = {}
        self._gpus: Optional[LeasedGpus] = None

    @property
    def gpus(self) -> Optional[LeasedGpus]:
        """The leased GPUs while held, else None."""
        return self._gpus

    @property
    def held(self) -> bool:
        """Whether this object holds GPUs now (a reused job's GPUs count)."""
        return self._gpus is not None

    def _forward_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr_lines.append(line)
            # An error line becomes the exception's message (error_for): printing it here too
            # showed every error twice, once forwarded and once in the traceback.
            if not self._quiet and not line.startswith("gpulane: error: "):
                try:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                except Exception:  # a closed or replaced sys.stderr must not kill the lease
                    pass

    def acquire(self) -> LeasedGpus:
        """Waits in line for the GPUs, takes the lease and sets the environment.

        Sets ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``GPULANE_JOB_ID``,
        ``GPULANE_GPU_UUIDS``, ``GPULANE_GPU_INDICES`` (and ``GPULANE_MEM_BYTES`` with ``mem``) in
        ``os.environ``. With ``mem`` (or inside a ``--mem`` job), PyTorch is asked to keep to it:
        ``torch.cuda.set_per_process_memory_fraction`` when CUDA starts (a courtesy, so that the job
        fails its own allocation first; gpulane stops a job over its declaration, docs/security.md). Inside a gpulane job (``GPULANE_JOB_ID`` and ``CUDA_VISIBLE_DEVICES`` set,
        e.g. under ``gpulane run`` or in an enclosing ``lease()``) it returns the job's GPUs at once,
        leasing nothing; asked for fewer than the job has, the first ``n`` of them, with the
        variables narrowed to them until :meth:`release`.

        Raises:
            CudaAlreadyInitializedError: CUDA already runs in this process.
            NoGpuError: ``no_wait`` and too few GPUs free now (exit 5).
            TimeoutError: ``timeout`` ran out (exit 6).
            InvalidRequestError: bad options, or a request these GPUs can never meet (exit 2).
            GpulaneError: any other failure, with the binary's message and exit code.
        """
        if self._gpus is not None:
            raise GpulaneError("this lease is already held")
        if self._reuse_job:
            job = _job_gpus_from_env()
            if job is not None:
                if len(job) < self._n:
                    raise InvalidRequestError(
                        f"this process runs inside gpulane job {job.job_id}, which has {len(job)} GPU(s), "
                        f"fewer than the {self._n} asked for", 2)
                if len(job) > self._n:  # the first n of them, within the block (CUDA must not run yet)
                    if self._check_cuda:
                        _check_cuda_not_initialized()
                    job = _first_of_job(job, self._n)
                    self._saved_env = {k: os.environ.get(k, _UNSET) for k in job.env}
                    os.environ.update(job.env)
                self._gpus = job
                limit_torch_memory(job.env.get("GPULANE_MEM_BYTES"))
                return job
        if self._check_cuda:
            _check_cuda_not_initialized()
        proc = subprocess.Popen(
            [find_binary(), *self._args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, close_fds=True,
            # Its own session: a Ctrl-C (terminal, Jupyter's interrupt) reaches Python alone, which
            # releases the lease when it leaves the with-block, and not while a caught
            # KeyboardInterrupt lets the program go on using the GPUs.
            start_new_session=True)
        self._proc = proc
        try:  # from here on, any exception (a Ctrl-C too) stops the holder before it leaves
            self._stderr_lines = []
            self._stderr_thread = threading.Thread(target=self._forward_stderr, args=(proc.stderr,),
                                                   name="gpulane-lease-stderr", daemon=True)
            self._stderr_thread.start()
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                code = proc.wait()
                self._stderr_thread.join()
                raise error_for(code, in_python_terms("".join(self._stderr_lines)), "gpulane _lease")
            grant = json.loads(line)
            gpus = LeasedGpus((LeasedGpu(int(i), str(u)) for i, u in zip(grant["gpus"], grant["uuids"])),
                              str(grant["job_id"]), dict(grant["env"]), reused=False)
        except BaseException:
            self._stop_child(terminate=True)
            raise
        self._saved_env = {k: os.environ.get(k, _UNSET) for k in gpus.env}
        os.environ.update(gpus.env)
        self._gpus = gpus
        limit_torch_memory(gpus.env.get("GPULANE_MEM_BYTES"))  # a courtesy: the monitor is the guarantee
        _held.add(self)  # held until release() or the process ends, referenced or not
        return gpus

    def _stop_child(self, terminate: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if terminate and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            if proc.stdin is not None:
                try:
                    proc.stdin.close()  # EOF: the holder gives the lease back and exits
                except OSError:
                    pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            if self._stderr_thread is not None:
                self._stderr_thread.join(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()

    def release(self) -> None:
        """Gives the GPUs back and restores the environment as it was before :meth:`acquire`.

        Returns once the lease is gone (another process may take the GPUs then). Does nothing when
        nothing is held; for a reused job's GPUs it only restores the variables it narrowed.
        """
        if self._gpus is None:
            return
        self._gpus = None
        for key, old in self._saved_env.items():
            if old is _UNSET:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._saved_env = {}
        _held.discard(self)
        self._stop_child(terminate=False)

    def __enter__(self) -> LeasedGpus:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lease(
    n: int = 1,
    min_free: Optional[Size] = None,
    mem: Optional[Size] = None,
    max_util: Optional[int] = None,
    timeout: Optional[Duration] = None,
    *,
    no_wait: bool = False,
    gpus: Optional[Union[str, Iterable[Union[int, str]]]] = None,
    share_foreign: bool = False,
    order: Optional[str] = None,
    partition: Optional[str] = None,
    mig: Optional[str] = None,
    uuid: bool = False,
    quiet: bool = False,
    check_cuda: bool = True,
    reuse_job: bool = True,
    time_limit: Optional[Duration] = None,
) -> Lease:
    """Lease GPUs for this process, in the same line as ``gpulane run``::

        with gpulane.lease(n=1, min_free="20GiB") as gpus:
            import torch          # CUDA must start inside the block
            model.to("cuda")      # cuda:0 is gpus[0]

    While held, the GPUs belong to this process and its children (no gpulane job is granted them),
    and ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` / ``GPULANE_JOB_ID`` are set in
    ``os.environ``; on leaving the block (also through an exception or KeyboardInterrupt) the
    lease is given back and the previous environment restored. It runs ``gpulane _lease`` (found
    through ``$GPULANE_BIN``, else ``PATH``), which holds the lease until this process closes its
    stdin or dies. Waiting status goes to ``sys.stderr``.

    Inside a gpulane job (``gpulane run``, a queued job, an enclosing ``lease()``: both
    ``GPULANE_JOB_ID`` and ``CUDA_VISIBLE_DEVICES`` set) the job's GPUs are returned at once: no
    waiting, no new lease; ``n`` fewer than the job has gives the first ``n`` of them, with
    ``CUDA_VISIBLE_DEVICES``, ``GPULANE_GPU_UUIDS`` and ``GPULANE_GPU_INDICES`` narrowed to them
    inside the block (``reuse_job=False`` leases among them instead).

    Args:
        n: how many GPUs (default 1).
        min_free: free memory each GPU needs: bytes (int) or a size with unit ("20GiB", "512MiB").
        mem: share a GPU: declare this much GPU memory (bytes or a size) instead of whole GPUs.
        max_util: each GPU at most this busy, percent (0-100).
        timeout: give up waiting after this long: seconds (number) or a duration ("10m", "1h30m");
            None waits for as long as it takes.
        no_wait: fail at once with NoGpuError when the GPUs are not free now.
        gpus: only these GPUs: indices (PCI bus order) or UUIDs.
        share_foreign: allow GPUs running processes outside gpulane's leases.
        order: rank qualifying GPUs by "memory", "util", "pci" or "bestfit".
        partition: only this partition's GPUs.
        mig: one MIG device of this profile (e.g. "1g.18gb").
        uuid: put UUIDs in CUDA_VISIBLE_DEVICES instead of indices.
        quiet: no waiting status on stderr.
        check_cuda: refuse (CudaAlreadyInitializedError) when CUDA already runs in this process.
        reuse_job: inside a gpulane job, return its GPUs instead of leasing.
        time_limit: this process is stopped (SIGTERM, then SIGKILL after run.kill_grace) once the
            lease has been held this long: seconds or a duration ("4h"); default: the machine's
            limits.default_time_limit for this user, if any.

    Returns:
        A :class:`Lease`; ``with`` gives the :class:`LeasedGpus`.

    Raises (on entering the block / acquire()):
        CudaAlreadyInitializedError, NoGpuError (exit 5), TimeoutError (exit 6),
        InvalidRequestError (exit 2), BinaryNotFoundError, GpulaneError (others).
    """
    return Lease(n, min_free=min_free, mem=mem, max_util=max_util, timeout=timeout, no_wait=no_wait, gpus=gpus,
                 share_foreign=share_foreign, order=order, partition=partition, mig=mig, uuid=uuid, quiet=quiet,
                 check_cuda=check_cuda, reuse_job=reuse_job, time_limit=time_limit)
