#!/usr/bin/env python3
"""Judges the daemon acceptance section (scripts/acceptance.d/queue.sh): prints PASS/FAIL/INFO lines.

Every submitted job completed exactly once with exit code 0; its log file exists in the directory it
was submitted from and is owned by its user; the --after job started after every array task ended;
no exclusive job overlapped any other job on the same GPU (torch_job.py's start/end log lines);
each job saw exactly one GPU, the one gpulane gave it.
"""
import argparse
import collections
import json
import os


def say(ok, text):
    print(("PASS " if ok else "FAIL ") + text)


ap = argparse.ArgumentParser()
for a in ("--queue", "--log", "--ids", "--after", "--array", "--uid-b", "--dir-a", "--dir-b"):
    ap.add_argument(a, required=True)
args = ap.parse_args()
ids = [int(x) for x in args.ids.split()]
jobs = {j["id"]: j for j in json.load(open(args.queue))}
states = collections.Counter(jobs[i]["state"] for i in ids if i in jobs)
say(all(i in jobs for i in ids), f"all {len(ids)} jobs are recorded by the restarted daemon")
say(all(jobs.get(i, {}).get("state") == "completed" and jobs[i].get("exit_code") == 0 for i in ids),
    f"every job completed with exit code 0 (states: {dict(states)})")

runs = collections.defaultdict(list)
for line in open(args.log):
    r = json.loads(line)
    runs[(str(r.get("job")), r["event"])].append(r)
twice = [i for i in ids if len(runs[(str(i), "start")]) != 1]
say(not twice, f"every job ran exactly once (ran other than once: {twice})")

owners_ok = True
for i in ids:
    j = jobs.get(i)
    if not j:
        continue
    d = args.dir_b if j["user"] != "root" else args.dir_a
    name = f"gpulane-{j['array_job_id']}_{j['array_index']}.out" if "array_index" in j else f"gpulane-{i}.out"
    path = os.path.join(d, name)
    want = int(args.uid_b) if j["user"] != "root" else 0
    if not os.path.exists(path) or os.stat(path).st_uid != want or "device_count" not in open(path).read():
        owners_ok = False
        print(f"INFO job {i}: log {path} missing, wrong owner or without the job's output")
say(owners_ok, "every job's log is in its submit directory, owned by its user, with the job's output")

intervals = []
for i in ids:
    s, e = runs[(str(i), "start")], runs[(str(i), "end")]
    if s and e:
        intervals.append((s[0]["uuid"], s[0]["t"], e[0]["t"], i, bool(s[0].get("mem_bytes"))))
        if s[0].get("device_count") != 1 or s[0]["uuid"] not in (s[0].get("gpulane_uuids") or ""):
            say(False, f"job {i} saw {s[0].get('device_count')} GPUs / {s[0]['uuid']} vs {s[0].get('gpulane_uuids')}")
overlaps = []
for a in intervals:
    for b in intervals:
        if a[3] < b[3] and a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and not (a[4] and b[4]):
            overlaps.append((a[3], b[3]))
say(not overlaps, f"no exclusive job overlapped another job on its GPU ({len(intervals)} runs; overlaps: {overlaps})")
shared = [x for x in intervals if x[4]]
concurrent = sum(1 for a in shared for b in shared if a[3] < b[3] and a[0] == b[0] and a[1] < b[2] and b[1] < a[2])
print(f"INFO --mem jobs that ran at the same time on one GPU: {concurrent} pairs")
array_end = max((runs[(str(i), 'end')][0]["t"] for i in range(int(args.array), int(args.array) + 4) if runs[(str(i), 'end')]), default=None)
after_start = runs[(args.after, "start")]
say(bool(after_start) and array_end is not None and after_start[0]["t"] > array_end,
    "the --after job started only after its dependency (the whole array) ended")
