#!/usr/bin/env python3
"""The daemon's sampler against its floor (issue 25, "Sampler footprint on a real GPU"): side by side
for --seconds, `gpulane daemon --user` sampling at --interval with no jobs, and gpulane_nvml_floor
(bench/nvml_floor.cc: the same NVML calls a sample makes, once per interval, in a plain loop and
nothing else). For each: CPU seconds (the process's CPU clock, all threads: utime + stime in ns) as a share
of one core over the period, resident memory at the end (VmRSS) and at its peak (VmHWM), threads;
and the ratio daemon/floor. Target: daemon CPU <= 1.2x the floor's, RSS <= 20 MiB.

  bench/sampler_floor.py [--gpulane GPULANE...] [--gpus 1 8] [--seconds 120] [--interval 1]       fake NVML (this machine)
  bench/sampler_floor.py --real [--seconds 120]                             the GPUs that are there

Fake: build/fake_nvml/current/libnvidia-ml.so.1 with the recorded H200 fixture cloned --gpus times
(as bench/telemetry_footprint.py), one pair of processes per count, in turn. Real (--real): neither
$GPULANE_NVML_LIBRARY nor $FAKE_NVML_STATE is set for the two processes: the driver's NVML.
Binaries: --gpulane and --floor, by default from build/ if there, else .carry/bin/; with --real
.carry/bin/ first (scripts/make-carry.sh builds both into it for the GPU machine).
The measured period starts after a warm-up (--warmup s, the first samples' costs excluded).
Prints Markdown on stdout; progress on stderr. Everything it starts it stops.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from telemetry_footprint import ROOT, call, fake_gpus  # noqa: E402

import json  # noqa: E402

FAKE_NVML = os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1")


def first_existing(*paths):
    for p in paths:
        if os.path.exists(p):
            return p
    return paths[-1]


class Proc:
    """A process measured through /proc."""

    def __init__(self, name, argv, env, log_path):
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self.log, stderr=self.log)

    def alive(self):
        return self.proc and self.proc.poll() is None

    def cpu_s(self):
        # The process's CPU clock (clock_getcpuclockid: every thread's, those ended included), in
        # ns where /proc/<pid>/stat's utime + stime come in ticks of 10 ms, too coarse for 0.05 %
        # of a core over two minutes. Its ID: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
        return time.clock_gettime_ns(ctypes.c_int32(((~self.proc.pid) << 3) | 2).value) / 1e9

    def status(self):
        out = {}
        for line in open(f"/proc/{self.proc.pid}/status"):
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
        return out

    def stop(self):
        if self.alive():
            self.proc.terminate()
            self.proc.wait(10)

    def log_text(self):
        return open(self.log_path).read()


def samples_of(sock):
    text = call(sock, {"op": "metrics"})["text"]
    return int(float(text.rsplit("gpulane_sampler_samples_total ", 1)[1].split()[0]))


def gpus_of(sock):
    return len(call(sock, {"op": "telemetry"})["gpus"])


def measure(args, gpus, tmp):
    """One side-by-side run; `gpus` None for --real. Returns a dict of figures."""
    folder = tempfile.mkdtemp(prefix=f"run{gpus or 'real'}-", dir=tmp)
    env = dict(os.environ)
    if gpus is None:
        env.pop("GPULANE_NVML_LIBRARY", None)
        env.pop("FAKE_NVML_STATE", None)
    else:
        state = os.path.join(folder, "nvml.json")
        json.dump(fake_gpus(gpus), open(state, "w"))
        env.update(GPULANE_NVML_LIBRARY=FAKE_NVML, FAKE_NVML_STATE=state)
    with open(os.path.join(folder, "config.toml"), "w") as f:
        f.write(f'[telemetry]\ninterval = "{args.interval:g}s"\n[web]\nlisten = "off"\n')  # no gpulane-web child
    daemons, socks = [], []
    for n, exe in enumerate(args.gpulane):
        home = os.path.join(folder, f"d{n}")
        os.makedirs(os.path.join(home, "leases"), mode=0o1777)
        sock = os.path.join(home, "sock")
        denv = dict(env, GPULANE_CONFIG=os.path.join(folder, "config.toml"), GPULANE_LEASE_DIR=os.path.join(home, "leases"),
                    GPULANE_SOCKET=sock, GPULANE_STATE_DIR=os.path.join(home, "state"), GPULANE_SYSTEM_DAEMON="0")
        daemons.append(Proc(exe, [exe, "daemon", "--user"], denv, os.path.join(home, "daemon.log")))
        socks.append(sock)
    floor = Proc("floor", [args.floor, f"{args.interval:g}"], env, os.path.join(folder, "floor.log"))
    procs = daemons + [floor]
    try:
        for p in procs:
            p.start()
        for daemon, sock in zip(daemons, socks):
            for _ in range(600):
                try:
                    call(sock, {"op": "ping"}, 1)
                    break
                except OSError:
                    if not daemon.alive():
                        break
                    time.sleep(0.05)
            else:
                raise RuntimeError(f"{daemon.name} did not answer ping in 30 s")
        for p in procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited early: {p.log_text()}")
        seen = gpus_of(socks[0])
        time.sleep(args.warmup)
        load0 = os.getloadavg()
        s0 = [samples_of(sock) for sock in socks]
        t0 = time.monotonic()
        cpu0 = {p: p.cpu_s() for p in procs}
        time.sleep(args.seconds)
        cpu = {p: p.cpu_s() - cpu0[p] for p in procs}
        wall = time.monotonic() - t0
        samples = [samples_of(sock) - s for sock, s in zip(socks, s0)]
        mem = {p: p.status() for p in procs}
        load1 = os.getloadavg()
        for p in procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited during the run: {p.log_text()}")
    finally:
        for p in procs:
            p.stop()
    return {"gpus": seen, "fake": gpus is not None, "wall": wall, "samples": samples, "load": (load0, load1),
            "daemons": [(p.name, 100 * cpu[p] / wall, mem[p]) for p in daemons],
            "floor": (100 * cpu[floor] / wall, mem[floor])}


def table(r):
    f, mf = r["floor"]
    ratio = lambda a, b: f"{a / b:.2f}x" if b > 0 else "n/a (floor 0)"
    mib = lambda kib: f"{kib / 1024:.1f} MiB"
    kind = "fake H200s (fixture cloned)" if r["fake"] else "real GPUs"
    lines = [f"### {r['gpus']} {kind}: {r['wall']:.0f} s, daemon samples {r['samples']}, load average "
             f"{r['load'][0][0]:.2f} at the start, {r['load'][1][0]:.2f} at the end\n",
             "| process | CPU, % of one core | x floor | RSS at the end | peak RSS (VmHWM) | threads |",
             "|---|---|---|---|---|---|",
             f"| floor ({os.path.basename(r.get('floor_exe', 'gpulane_nvml_floor'))}) | {f:.3f} % | 1 | {mib(mf['VmRSS'])} | "
             f"{mib(mf['VmHWM'])} | {mf['Threads']} |"]
    for name, d, md in r["daemons"]:
        lines.append(f"| daemon `{name}`, sampler at {r['interval']:g} s, no jobs | {d:.3f} % | {ratio(d, f)} | "
                     f"{mib(md['VmRSS'])} | {mib(md['VmHWM'])} | {md['Threads']} |")
    lines += ["", "Targets: daemon CPU <= 1.2x the floor's, RSS <= 20 MiB.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", nargs="+",
                    help="one daemon per binary, all side by side with the floor (e.g. before and after a change)")
    ap.add_argument("--floor")
    ap.add_argument("--real", action="store_true", help="the driver's NVML and the GPUs there (no fake)")
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 8], help="fake GPU counts, one run each")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    args = ap.parse_args()
    # The GPU machine runs what scripts/make-carry.sh put in .carry/bin; this one its build/.
    folders = [os.path.join(ROOT, ".carry", "bin"), os.path.join(ROOT, "build")]
    if not args.real:
        folders.reverse()
    args.gpulane = args.gpulane or [first_existing(*(os.path.join(f, "gpulane") for f in folders))]
    args.floor = args.floor or first_existing(*(os.path.join(f, "gpulane_nvml_floor") for f in folders))
    for path in tuple(args.gpulane) + (args.floor,) + (() if args.real else (FAKE_NVML,)):
        if not os.path.exists(path):
            print(f"sampler_floor: {path} not found: build it (cmake --build build --target gpulane gpulane_nvml_floor"
                  f" fake_nvml), or give --gpulane/--floor", file=sys.stderr)
            return 2
    tmp = tempfile.mkdtemp(prefix="gpulane-sampler-floor-")
    print(f"- gpulane: {' '.join(args.gpulane)}; floor: {args.floor}; {os.cpu_count()} CPUs; interval {args.interval:g} s; "
          f"warm-up {args.warmup:g} s before each measured period\n")
    try:
        for gpus in ([None] if args.real else args.gpus):
            print(f"measuring {'the real GPUs' if gpus is None else f'{gpus} fake GPUs'} for {args.seconds:g} s",
                  file=sys.stderr)
            try:
                r = measure(args, gpus, tmp)
            except RuntimeError as e:
                print(f"sampler_floor: {e}".rstrip(), file=sys.stderr)
                return 1
            r["interval"] = args.interval
            print(table(r), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
