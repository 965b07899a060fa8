#!/usr/bin/env python3
"""Judges the `gpulane run` acceptance jobs from torch_job.py's shared log. Prints lines
"PASS text" / "FAIL text" / "INFO text" for scripts/gpu-acceptance.sh's report_lines.

  check_run.py exclusive|shared --log LOG --status STATUS_JSON --rcs "RC RC ..." [--mem-bytes B] [--sampler FILE]

exclusive (`gpulane run -g 1`): every job exited 0, saw exactly one GPU whose UUID is its
GPULANE_GPU_UUIDS; no two jobs overlap in time on one UUID; with 2+ GPUs, min(GPUs, jobs) GPUs were used.
shared (`gpulane run --mem B`): the same per job, plus GPULANE_MEM_BYTES = B; jobs overlap in time
(on one GPU when there is one GPU); jobs x B at any moment on a GPU stays <= its total memory; with
2+ GPUs, the jobs spread over at least 2 GPUs.
--sampler: lease_sampler.py's summary of the lease directory during the jobs, checked as well.
"""
import argparse
import itertools
import json
import sys


def say(ok, text):
    print(("PASS " if ok else "FAIL ") + text)


def info(text):
    print("INFO " + text)


def max_concurrent(intervals):
    """Most intervals open at one moment (touching ends do not count as overlap)."""
    events = sorted([(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["exclusive", "shared"])
    ap.add_argument("--log", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--rcs", required=True)
    ap.add_argument("--mem-bytes", type=int)
    ap.add_argument("--sampler")
    args = ap.parse_args()

    status = json.load(open(args.status))
    total = {g["uuid"]: g.get("memory_total_bytes") for g in status["gpus"]}
    ngpu = len(total)
    rcs = [int(x) for x in args.rcs.split()]
    njobs = len(rcs)
    say(all(rc == 0 for rc in rcs), f"all {njobs} gpulane run commands exit 0 (exit statuses: {' '.join(map(str, rcs))})")

    starts, ends = {}, {}
    for line in open(args.log):
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
        except ValueError:
            say(False, f"log line is JSON: {line[:100]}")
            continue
        (starts if r["event"] == "start" else ends)[r["pid"]] = r
    jobs = [(starts[p], ends.get(p)) for p in starts]
    say(len(starts) == njobs and all(e is not None for _, e in jobs),
        f"the log has a start and an end for each of the {njobs} jobs ({len(starts)} starts, {len(ends)} ends)")
    ids = [s["job"] for s, _ in jobs]
    say(len(set(ids)) == len(ids) and all(ids), f"each job has its own GPULANE_JOB_ID ({', '.join(ids)})")

    bad_count = [f"{s['job']}: {s['device_count']}" for s, _ in jobs if s["device_count"] != 1]
    say(not bad_count, "each job sees exactly one GPU (torch.cuda.device_count() == 1)"
        + (f"; not: {', '.join(bad_count)}" if bad_count else ""))
    bad_uuid = [f"{s['job']}: torch {s['uuid']} vs GPULANE_GPU_UUIDS {s['gpulane_uuids']}" for s, _ in jobs
                if not s["uuid"] or s["uuid"] != s["gpulane_uuids"]]
    say(not bad_uuid, "each job's GPU UUID (torch) equals its GPULANE_GPU_UUIDS" + (f"; not: {'; '.join(bad_uuid)}" if bad_uuid else ""))
    unknown = [s["uuid"] for s, _ in jobs if s["uuid"] not in total]
    say(not unknown, "each job's UUID is one of this machine's GPUs (gpulane status --json)"
        + (f"; unknown: {unknown}" if unknown else ""))
    if args.mode == "shared" and args.mem_bytes:
        bad_mem = [f"{s['job']}: {s['mem_bytes']}" for s, _ in jobs if str(s["mem_bytes"]) != str(args.mem_bytes)]
        say(not bad_mem, f"each job has GPULANE_MEM_BYTES={args.mem_bytes}" + (f"; not: {', '.join(bad_mem)}" if bad_mem else ""))

    done = [(s, e) for s, e in jobs if e is not None]
    if not done:
        return
    t0 = min(s["t"] for s, _ in done)
    for s, e in sorted(done, key=lambda j: j[0]["t"]):
        speed = "stand-in torch" if "stand-in" in str(s.get("torch")) else f"{e.get('tflops', 0):.0f} TFLOP/s bf16"
        info(f"{s['job']:>8} pid {s['pid']:>7} CUDA_VISIBLE_DEVICES={s['cvd']} {s['uuid']}: "
             f"{s['t'] - t0:6.2f} .. {e['t'] - t0:6.2f} s, {speed}")
    by_uuid = {}
    for s, e in done:
        by_uuid.setdefault(s["uuid"], []).append((s["t"], e["t"]))
    conc = {u: max_concurrent(iv) for u, iv in by_uuid.items()}
    overall = max_concurrent([iv for ivs in by_uuid.values() for iv in ivs])
    info(f"most jobs at once: {overall} overall; per GPU: " + ", ".join(f"{u[:12]}..: {c}" for u, c in conc.items()))
    used = len(by_uuid)

    if args.mode == "exclusive":
        pairs = [(a, b) for ivs in by_uuid.values() for a, b in itertools.combinations(sorted(ivs), 2) if b[0] < a[1]]
        say(not pairs, "no two jobs overlap in time on the same GPU"
            + (f"; {len(pairs)} overlapping pair(s), e.g. {pairs[0][0][1] - pairs[0][1][0]:.2f} s" if pairs else ""))
        want = min(ngpu, njobs)
        if ngpu >= 2:
            say(used == want, f"the jobs used {used} of the {ngpu} GPUs (want {want}: one job per GPU at a time)")
            info(f"jobs at once overall: {overall} (at most {want} expected)")
            say(overall <= want, f"at most {want} jobs ran at once ({overall})")
        else:
            info(f"1 GPU: the {njobs} jobs ran one after another")
    else:
        mem = args.mem_bytes or 0
        over = [f"{u}: {c} x {mem >> 30} GiB > {total.get(u, 0) >> 30} GiB" for u, c in conc.items()
                if total.get(u) and c * mem > total[u]]
        say(not over, "declared memory on each GPU at any moment <= its total (jobs at once x --mem: "
            + ", ".join(f"{c} x {mem >> 30} GiB of {(total.get(u) or 0) / (1 << 30):.1f} GiB" for u, c in conc.items()) + ")"
            + (f"; over: {'; '.join(over)}" if over else ""))
        pairs = [(a, b) for ivs in by_uuid.values() for a, b in itertools.combinations(sorted(ivs), 2) if b[0] < a[1]]
        overlap_s = sum(min(a[1], b[1]) - b[0] for a, b in pairs)
        if ngpu == 1:
            say(overlap_s > 0, f"the jobs share the GPU: they overlap in time on it (total pairwise overlap {overlap_s:.1f} s, "
                f"{conc.get(next(iter(by_uuid)), 0)} at once)")
        else:
            all_iv = sorted(iv for ivs in by_uuid.values() for iv in ivs)
            any_overlap = sum(max(0.0, min(a[1], b[1]) - b[0]) for a, b in itertools.combinations(all_iv, 2))
            say(any_overlap > 0, f"the jobs run concurrently (total pairwise overlap {any_overlap:.1f} s; on one GPU {overlap_s:.1f} s)")
            say(used >= 2, f"the jobs spread over {used} of the {ngpu} GPUs (want at least 2)")

    if args.sampler:
        try:
            smp = json.load(open(args.sampler))
        except (OSError, ValueError) as e:
            say(False, f"lease directory sampler summary readable ({e})")
            return
        info(f"lease directory sampled {smp['samples']} times; most live leases at once: {smp['max_live_leases']}")
        for u, m in smp["gpus"].items():
            info(f"  {u}: max declared {m['max_declared_bytes'] / (1 << 30):.0f} GiB, max shared {m['max_shared']}, "
                 f"max whole-GPU {m['max_exclusive']}")
        if args.mode == "exclusive":
            bad = [u for u, m in smp["gpus"].items() if m["max_exclusive"] > 1 or m["max_mixed"]]
            say(not bad, "lease directory: never two leases on one GPU at once" + (f"; on {bad}" if bad else ""))
        else:
            bad = [u for u, m in smp["gpus"].items() if total.get(u) and m["max_declared_bytes"] > total[u]]
            say(not bad and smp["samples"] > 0,
                "lease directory: the sum of declared memory on a GPU never exceeded its total" + (f"; on {bad}" if bad else ""))
    return


if __name__ == "__main__":
    sys.exit(main())
