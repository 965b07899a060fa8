"""``gpulane.status()`` and ``gpulane.pick()``: the binary's ``status --json`` and ``pick``.

Both go through the ``gpulane`` binary, not through the daemon's socket directly: the binary
already asks a running daemon for its GPU snapshot first (and reads NVML itself otherwise), and
``pick``'s choice is the scheduler's judgement (``src/sched``) over the lease directory, which only
the binary makes. A socket client here would be a second implementation of the same judgement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Union

from ._binary import Size, request_args, run_binary
from .errors import GpulaneError


@dataclass(frozen=True)
class Process:
    """A process with a context on a GPU (``processes[]`` of docs/status-json.md)."""

    pid: int
    kind: str  #: "compute", "graphics" or "compute+graphics"
    used_memory_bytes: Optional[int] = None  #: bytes; None when NVML does not report it
    uid: Optional[int] = None
    user: Optional[str] = None
    command: Optional[str] = None
    cmdline: Optional[str] = None
    mig_uuid: Optional[str] = None
    stray_job_id: Optional[str] = None  #: the gpulane job it belongs to, on a GPU that job did not lease


@dataclass(frozen=True)
class MigDevice:
    """A MIG device of a GPU."""

    uuid: str
    gpu_instance_id: Optional[int] = None
    compute_instance_id: Optional[int] = None
    memory_total_bytes: Optional[int] = None
    memory_used_bytes: Optional[int] = None


@dataclass(frozen=True)
class NvlinkPeer:
    """An active NVLink connection: the remote end's PCI bus ID and the number of links."""

    pci_bus_id: str
    links: int


@dataclass(frozen=True)
class Gpu:
    """One GPU as ``gpulane status --json`` describes it (schema_version 1, docs/status-json.md).

    ``index`` is the PCI-bus-order index, i.e. CUDA's with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    Units are in the names: ``_bytes``, ``_pct`` (percent), ``_c`` (°C), ``_mw`` (milliwatts).
    ``None`` means not reported (never zero in place of an unknown value). ``processes`` is
    ``None`` when the processes are unknown (``processes_known`` false): unknown is not empty.
    """

    index: int
    nvml_index: int
    uuid: str
    pci_bus_id: str
    allowed: bool
    state: str  #: "ok" or "failed"
    processes_known: bool
    error: Optional[str] = None
    drained: Optional[str] = None
    anomalies: List[str] = field(default_factory=list)
    minor_number: Optional[int] = None
    name: Optional[str] = None
    memory_total_bytes: Optional[int] = None
    memory_used_bytes: Optional[int] = None
    memory_free_bytes: Optional[int] = None
    memory_reserved_bytes: Optional[int] = None
    utilization_gpu_pct: Optional[int] = None
    utilization_memory_pct: Optional[int] = None
    temperature_c: Optional[int] = None
    power_draw_mw: Optional[int] = None
    power_limit_mw: Optional[int] = None
    performance_state: Optional[str] = None
    compute_mode: Optional[str] = None
    persistence_mode: Optional[bool] = None
    mig_enabled: Optional[bool] = None
    mig_devices: List[MigDevice] = field(default_factory=list)
    processes: Optional[List[Process]] = None
    nvlink_peers: List[NvlinkPeer] = field(default_factory=list)
    held_by: Optional[str] = None  #: who holds a gpulane lease on it, e.g. "job 12 (alice)"

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Gpu":
        """A Gpu from one object of ``status --json``'s ``gpus`` (unknown fields are ignored)."""
        simple = {k: obj[k] for k in cls.__dataclass_fields__  # type: ignore[attr-defined]
                  if k in obj and k not in ("mig_devices", "processes", "nvlink_peers", "anomalies")}
        procs = None
        if "processes" in obj:
            procs = [Process(pid=p["pid"], kind=p.get("kind", "compute"),
                             used_memory_bytes=p.get("used_memory_bytes"), uid=p.get("uid"),
                             user=p.get("user"), command=p.get("command"), cmdline=p.get("cmdline"),
                             mig_uuid=p.get("mig_uuid"), stray_job_id=(p.get("stray") or {}).get("job_id"))
                     for p in obj["processes"]]
        migs = [MigDevice(uuid=m["uuid"], gpu_instance_id=m.get("gpu_instance_id"),
                          compute_instance_id=m.get("compute_instance_id"),
                          memory_total_bytes=m.get("memory_total_bytes"),
                          memory_used_bytes=m.get("memory_used_bytes")) for m in obj.get("mig_devices", [])]
        peers = [NvlinkPeer(pci_bus_id=p["pci_bus_id"], links=p["links"]) for p in obj.get("nvlink_peers", [])]
        return cls(**simple, anomalies=list(obj.get("anomalies", [])), mig_devices=migs, processes=procs,
                   nvlink_peers=peers)


def status() -> List[Gpu]:
    """Every GPU of the machine, in PCI bus order (``gpulane status --json``).

    Through the binary, which asks a running gpulane daemon for its snapshot and else reads NVML.

    Raises:
        BinaryNotFoundError: no gpulane binary.
        NoDriverError (exit 3), NvmlError (exit 4), GpulaneError: the binary failed.
    """
    out = run_binary(["status", "--json"], "gpulane status")
    try:
        doc = json.loads(out)
    except ValueError as e:
        raise GpulaneError(f"gpulane status --json printed no JSON document: {e}") from None
    return [Gpu.from_json(g) for g in doc.get("gpus", [])]


def pick(
    n: int = 1,
    min_free: Optional[Size] = "20GiB",
    max_util: Optional[int] = None,
    *,
    mem: Optional[Size] = None,
    gpus: Optional[Union[str, Iterable[Union[int, str]]]] = None,
    share_foreign: bool = False,
    order: Optional[str] = None,
    partition: Optional[str] = None,
    uuid: bool = False,
) -> List[str]:
    """The GPUs ``gpulane run --no-wait`` with these options would be granted now, without leasing
    them (``gpulane pick``): PCI-bus-order indices as strings (``["0", "3"]``), or UUIDs with
    ``uuid=True``; a MIG device is named by its MIG- UUID. Nothing is reserved: use :func:`lease`
    to keep others off them.

    Args:
        n: how many GPUs.
        min_free: free memory each GPU needs: bytes (int) or a size with unit ("20GiB"); ``None``:
            no minimum.
        max_util: each GPU at most this busy, percent (0-100).
        mem: share GPUs: declare this much memory per GPU instead of whole GPUs.
        gpus: only these GPUs (indices or UUIDs).
        share_foreign: allow GPUs running processes outside gpulane's leases.
        order: "memory", "util", "pci" or "bestfit".
        partition: only this partition's GPUs.
        uuid: return UUIDs instead of indices.

    Raises:
        NoGpuError: too few GPUs free now (exit 5).
        InvalidRequestError: bad values, or a request these GPUs can never meet (exit 2).
        GpulaneError: other failures of the binary (no driver: NoDriverError, ...).
    """
    args = ["pick", *request_args(n, min_free=min_free, mem=mem, max_util=max_util, gpus=gpus,
                                  share_foreign=share_foreign, order=order, partition=partition)]
    if uuid:
        args.append("--uuid")
    out = run_binary(args, "gpulane pick").strip()
    return [part for part in out.split(",") if part]
