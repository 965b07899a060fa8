#!/usr/bin/env python3
"""Compares `gpulane status --json` with nvidia-smi, GPU by GPU and field by field.

Inputs are two files, read back to back by the caller so that they describe the same moment:
  --status-json FILE  output of `gpulane status --json` (run without CUDA_VISIBLE_DEVICES)
  --smi-csv FILE      output of `nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.used,memory.total
                      --format=csv,noheader,nounits` (extra columns after these five are allowed:
                      name and driver_version are compared when present)

GPUs are matched by UUID. nvidia-smi numbers GPUs in NVML order; gpulane's "index" is PCI bus order
and its "nvml_index" is NVML's, so the checker verifies both mappings explicitly:
  nvml_index == nvidia-smi's index, and index == the GPU's rank when all GPUs are sorted by PCI bus id.
Memory: gpulane reports bytes, nvidia-smi MiB; gpulane's bytes >> 20 must equal nvidia-smi's value
(memory.total exactly; memory.used within --used-tolerance-mib, since it can move between the reads).

Prints a table, then "OK" or the list of mismatches. Exit status: 0 all match, 1 a mismatch,
2 unusable input.
"""
import argparse
import csv
import json
import sys

SMI_COLUMNS = ["index", "uuid", "pci.bus_id", "memory.used", "memory.total", "name", "driver_version"]


def norm_bus_id(text):
    """'00000000:00:06.0' and '0000:00:06.0' (any case) -> (domain, bus, device, function)."""
    try:
        domain, bus, rest = text.strip().split(":")
        device, function = rest.split(".")
        return (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return None


def as_int(text):
    try:
        return int(str(text).strip())
    except ValueError:
        return None  # "[N/A]", "[Insufficient Permissions]", ...


def read_smi(path):
    rows = []
    with open(path, newline="") as f:
        for fields in csv.reader(f, skipinitialspace=True):
            if not fields or not "".join(fields).strip():
                continue
            if len(fields) < 5:
                raise ValueError(f"nvidia-smi line has {len(fields)} fields, want at least 5: {fields}")
            rows.append({SMI_COLUMNS[i]: v.strip() for i, v in enumerate(fields[: len(SMI_COLUMNS)])})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--status-json", required=True)
    ap.add_argument("--smi-csv", required=True)
    ap.add_argument("--used-tolerance-mib", type=int, default=64)
    args = ap.parse_args()

    try:
        with open(args.status_json) as f:
            status = json.load(f)
        gpus = status["gpus"]
        smi = read_smi(args.smi_csv)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: unusable input: {e}")
        return 2

    problems = []
    tol = args.used_tolerance_mib

    if len(gpus) != len(smi):
        problems.append(f"GPU count: gpulane {len(gpus)}, nvidia-smi {len(smi)}")

    by_uuid = {g.get("uuid"): g for g in gpus}
    if len(by_uuid) != len(gpus):
        problems.append("gpulane lists a UUID twice")
    pci_rank = {}
    keyed = [(norm_bus_id(g.get("pci_bus_id", "")), g.get("uuid")) for g in gpus]
    if any(k is None for k, _ in keyed):
        problems.append("gpulane has an unparsable pci_bus_id")
    else:
        for rank, (_, uuid) in enumerate(sorted(keyed)):
            pci_rank[uuid] = rank
    indices = sorted(g.get("index") for g in gpus)
    if indices != list(range(len(gpus))):
        problems.append(f"gpulane indices are not 0..{len(gpus) - 1}: {indices}")

    header = ["smi", "uuid", "nvml_index", "index(pci)", "pci_bus_id", "used MiB gl/smi", "total MiB gl/smi", "verdict"]
    table = []
    seen = set()
    for row in smi:
        uuid = row["uuid"]
        g = by_uuid.get(uuid)
        if g is None:
            problems.append(f"nvidia-smi GPU {row['index']} {uuid}: not in gpulane's list")
            table.append([row["index"], uuid, "-", "-", row["pci.bus_id"], "-", "-", "MISSING"])
            continue
        seen.add(uuid)
        bad = []
        smi_index = as_int(row["index"])
        if g.get("nvml_index") != smi_index:
            bad.append(f"nvml_index {g.get('nvml_index')} != nvidia-smi index {row['index']}")
        if uuid in pci_rank and g.get("index") != pci_rank[uuid]:
            bad.append(f"index {g.get('index')} != PCI rank {pci_rank[uuid]}")
        gl_bus, smi_bus = norm_bus_id(g.get("pci_bus_id", "")), norm_bus_id(row["pci.bus_id"])
        if gl_bus is None or gl_bus != smi_bus:
            bad.append(f"pci_bus_id {g.get('pci_bus_id')} != {row['pci.bus_id']}")
        if g.get("state") != "ok":
            bad.append(f"state {g.get('state')}: {g.get('error')}")

        def mib(key):
            v = g.get(key)
            return v >> 20 if isinstance(v, int) else None

        gl_used, smi_used = mib("memory_used_bytes"), as_int(row["memory.used"])
        gl_total, smi_total = mib("memory_total_bytes"), as_int(row["memory.total"])
        if gl_total is None or smi_total is None or gl_total != smi_total:
            bad.append(f"memory total {gl_total} MiB != {row['memory.total']} MiB")
        if gl_used is None or smi_used is None or abs(gl_used - smi_used) > tol:
            bad.append(f"memory used {gl_used} MiB vs {row['memory.used']} MiB (tolerance {tol} MiB)")
        if row.get("name") and g.get("name") != row["name"]:
            bad.append(f"name {g.get('name')!r} != {row['name']!r}")
        if row.get("driver_version") and status.get("driver_version") != row["driver_version"]:
            bad.append(f"driver_version {status.get('driver_version')!r} != {row['driver_version']!r}")
        problems += [f"GPU {uuid}: {b}" for b in bad]
        used_note = "" if gl_used == smi_used or gl_used is None or smi_used is None else f" (d={gl_used - smi_used:+d})"
        table.append([
            row["index"], uuid, str(g.get("nvml_index")), str(g.get("index")),
            f"{g.get('pci_bus_id')}" + ("" if gl_bus == smi_bus else f" / {row['pci.bus_id']}"),
            f"{gl_used}/{row['memory.used']}{used_note}", f"{gl_total}/{row['memory.total']}",
            "ok" if not bad else "MISMATCH",
        ])
    for g in gpus:
        if g.get("uuid") not in seen:
            problems.append(f"gpulane GPU {g.get('index')} {g.get('uuid')}: not in nvidia-smi's list")
            table.append(["-", g.get("uuid"), str(g.get("nvml_index")), str(g.get("index")), g.get("pci_bus_id"), "-", "-",
                          "EXTRA"])

    widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths]] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    if status.get("nvml_order_matches_pci_order") is not None:
        print(f"nvml_order_matches_pci_order: {status['nvml_order_matches_pci_order']}")
        differs = any(g.get("index") != g.get("nvml_index") for g in gpus)
        if status["nvml_order_matches_pci_order"] == differs:
            problems.append("nvml_order_matches_pci_order disagrees with the index/nvml_index pairs")
    if problems:
        print("MISMATCH:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"OK: {len(gpus)} GPU(s) match (used within {tol} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
