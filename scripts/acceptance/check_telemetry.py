#!/usr/bin/env python3
"""Checks gpulane's usage record of a PyTorch job against nvidia-smi sampled beside it
(scripts/acceptance.d/telemetry.sh, issue 11).

  check_telemetry.py RECORD_JSON SMI_GPU_CSV SMI_APPS_CSV JOB_PID

RECORD_JSON: `gpulane` op usage's "record" (job_id, start_s, end_s, usage{...}).
SMI_GPU_CSV: `nvidia-smi --query-gpu=timestamp,power.draw,utilization.gpu,memory.used -i 0
--format=csv,noheader,nounits -lms 200` (timestamp "2026/12/03 10:01:02.345", W, %, MiB).
SMI_APPS_CSV: `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 200`.
Prints PASS/FAIL/INFO lines: peak memory of the job's process (within 3 %), energy against
nvidia-smi's power draw integrated over the record's start..end (within 15 %), mean utilisation
(within 15 points), GPU-seconds against the run time.
"""
import datetime
import json
import sys


def parse_smi_gpu(path):
    rows = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rows.append((t, float(parts[1]), float(parts[2]), float(parts[3])))
        except ValueError:
            continue
    return rows


def main():
    record = json.load(open(sys.argv[1]))
    gpu_rows = parse_smi_gpu(sys.argv[2])
    pid = sys.argv[4]
    apps_mib = []
    for line in open(sys.argv[3]):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0] == pid:
            try:
                apps_mib.append(float(parts[1]))
            except ValueError:
                pass
    u = record["usage"]
    start, end = record["start_s"], record["end_s"]
    print(f"INFO gpulane: run {u['run_s']:.1f} s, {u['gpu_s']:.1f} GPU-s, energy {u.get('energy_j')} J, "
          f"peak {u.get('peak_memory_bytes')} B, mean util {u.get('mean_util_pct')} %, idle {u.get('idle_fraction')}, "
          f"{u['samples']} samples")
    ok_gpu_s = abs(u["gpu_s"] - u["run_s"]) < 1e-6 and u["run_s"] > 0
    print(("PASS" if ok_gpu_s else "FAIL") + f" GPU-seconds {u['gpu_s']:.1f} = run time x 1 GPU")
    if apps_mib and "peak_memory_bytes" in u:
        smi_peak = max(apps_mib)
        gl_peak = u["peak_memory_bytes"] / 2**20
        good = abs(gl_peak - smi_peak) <= 0.03 * smi_peak
        print(("PASS" if good else "FAIL") + f" peak memory {gl_peak:.0f} MiB vs nvidia-smi's {smi_peak:.0f} MiB for pid {pid}")
    else:
        print(f"FAIL no peak memory to compare (nvidia-smi rows for pid {pid}: {len(apps_mib)}; gpulane: "
              f"{u.get('peak_memory_bytes')})")
    inside = [r for r in gpu_rows if start <= r[0] <= end]
    if len(inside) >= 5 and "energy_j" in u:
        joules = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(inside, inside[1:]))
        # gpulane's energy runs from its first to its last sample of the job; scale the integral to
        # that span's length: (samples - 1) x the interval is unknown here, so compare mean powers.
        smi_w = joules / (inside[-1][0] - inside[0][0])
        gl_span = u["run_s"]
        gl_w = u["energy_j"] / gl_span if gl_span > 0 else 0
        print(f"INFO nvidia-smi: {len(inside)} samples in the job's span, {joules:.0f} J over "
              f"{inside[-1][0] - inside[0][0]:.1f} s (mean {smi_w:.0f} W); gpulane {u['energy_j']:.0f} J over its "
              f"{gl_span:.1f} s (mean {gl_w:.0f} W)")
        good = abs(gl_w - smi_w) <= 0.15 * smi_w
        print(("PASS" if good else "FAIL") + f" mean power from NVML's energy counter {gl_w:.0f} W vs nvidia-smi's "
              f"power draw {smi_w:.0f} W (15 %)")
        smi_util = sum(r[2] for r in inside) / len(inside)
        if "mean_util_pct" in u:
            good = abs(u["mean_util_pct"] - smi_util) <= 15
            print(("PASS" if good else "FAIL") + f" mean utilisation {u['mean_util_pct']:.0f} % vs nvidia-smi's "
                  f"{smi_util:.0f} % (15 points)")
    else:
        print(f"FAIL too few nvidia-smi samples in the job's span ({len(inside)}) or no energy from gpulane")
    return 0


if __name__ == "__main__":
    sys.exit(main())
