#!/usr/bin/env python3
"""Runs the shell examples of README.md and docs/*.md as written (tests/doc/README.md).

Each page runs in a fresh `bash --norc --noprofile` of its own, in a sandbox: a clean environment
(HOME, PATH with the built gpulane first, a temporary lease directory, runtime and temp folder), the
fake NVML on the idle 2 x H200 recording, and a working folder that mirrors the clone. Every command
of the page's fenced shell blocks runs in that one shell, in page order (so a variable or `export`
of one example is there for the next, as in a reader's terminal), and must exit as the page says.

    run_doc_tests.py --build BUILD_DIR --source SOURCE_DIR PAGE.md [PAGE.md ...] [--list]
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_examples  # noqa: E402
import doc_sandbox  # noqa: E402

DEFAULT_TIMEOUT_S = 30


def normalise(line, digits=False):
    return re.sub(r"\s+", " ", line if digits else re.sub(r"\d+", "0", line)).strip()


def output_matches(shown, printed, digits=False):
    """Whether every line the page shows is among the lines PRINTED, in the page's order, digits and
    spacing aside (a command may print more: a warning, a usage line); a shown '...' stands for
    lines left out."""
    got = iter(normalise(p, digits) for p in printed if p.strip())
    return all(any(g == want for g in got) for want in (normalise(s, digits) for s in shown)
               if want and want != "...")


def judge(example, result):
    """None when the example did what the page says, else why not."""
    if result.timed_out and example.stop_s is None:
        return f"did not finish within {result.limit_s} s"
    if example.stop_s is not None and result.interrupted:
        return None if result.output.strip() else f"printed nothing in {example.stop_s} s"
    if result.rc != example.exit_code:
        return f"exit status {result.rc}, the page expects {example.exit_code}"
    if example.output and not result.output.strip():
        return "the page shows output, the command printed nothing"
    if example.check_output and not output_matches(example.output or [], result.output.splitlines(),
                                                   example.exact_output):
        aside = "spacing" if example.exact_output else "digits and spacing"
        return f"its output differs from the page's ({aside} aside)"
    return None


def left_behind(box, before):
    """What the page made in its working and temporary folders that is still there: the entries that
    were not there when the page started (`before`: their entries then), but the stand-ins' output
    (the user's programs' own files, not the page's)."""
    return sorted(f"{d}/{e}" for d in ("work", "tmp") for e in os.listdir(box.path(d))
                  if e not in before[d] and not (d == "work" and e in doc_sandbox.STANDIN_OUTPUTS))


def run_example(session, example):
    limit_s = example.timeout_s or DEFAULT_TIMEOUT_S
    if example.stop_s is not None:
        return session.run(example.command, limit_s=example.stop_s, interrupt=True)
    deadline = time.monotonic() + (example.retry_s or 0)
    while True:
        result = session.run(example.command, limit_s=limit_s)
        if result.rc == example.exit_code or example.retry_s is None or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def report_failure(page, example, why, result):
    print(f"FAIL {page}:{example.line}: {why}\n  $ {example.command}", file=sys.stderr)
    for line in result.output.splitlines()[-15:]:
        print(f"  | {line}", file=sys.stderr)


def run_page(page, args, totals):
    with open(page, encoding="utf-8") as f:
        examples, errors = doc_examples.parse_page(f.read())
    name = os.path.relpath(page, args.source)
    for e in errors:
        print(f"FAIL {name}:{e}", file=sys.stderr)
    skipped, setup, failed, ran = {}, 0, len(errors), 0
    runnable = [e for e in examples if not e.skip and not e.setup]
    for e in examples:
        if e.skip:
            skipped[e.skip] = skipped.get(e.skip, 0) + 1
        elif e.setup:
            setup += 1
    if args.list:
        for e in examples:
            tag = f"skip: {e.skip}" if e.skip else f"setup: {e.setup}" if e.setup else "run"
            print(f"{name}:{e.line}: [{tag}] {e.command}")
    elif runnable:
        with doc_sandbox.Sandbox(args.build, args.source) as box:
            before = {d: set(os.listdir(box.path(d))) for d in ("work", "tmp")}
            with box.session() as session:
                for e in runnable:
                    result = run_example(session, e)
                    ran += 1
                    why = judge(e, result)
                    if not why and e.cleans and left_behind(box, before):
                        why = "it leaves behind what the page made: " + ", ".join(left_behind(box, before))
                    if args.show:
                        print(f"--- {name}:{e.line}: $ {e.command}\n{result.output.rstrip()}")
                    if why:
                        failed += 1
                        report_failure(name, e, why, result)
            survivors = box.stop_processes()
            if survivors:
                failed += 1
                print(f"FAIL {name}: processes the page started survived SIGKILL: {survivors}", file=sys.stderr)
    summary = (f"{name}: {len(examples)} examples found, {ran} run, {setup} set-up steps not run, "
               f"{sum(skipped.values())} skipped, {failed} failed")
    print(summary)
    for reason, count in sorted(skipped.items()):
        print(f"  skipped {count}: {reason}")
    for key, value in (("found", len(examples)), ("run", ran), ("setup", setup),
                       ("skipped", sum(skipped.values())), ("failed", failed)):
        totals[key] = totals.get(key, 0) + value
    return failed == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, help="the build folder (gpulane, fake_nvml/)")
    parser.add_argument("--source", required=True, help="the source tree (README.md, docs/, tests/)")
    parser.add_argument("--list", action="store_true", help="list the examples and what is done with each")
    parser.add_argument("--show", action="store_true", help="print each command and its output")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    args.build, args.source = os.path.abspath(args.build), os.path.abspath(args.source)
    ok, totals = True, {}
    started = time.monotonic()
    for page in args.pages:
        ok = run_page(os.path.abspath(page), args, totals) and ok
    if len(args.pages) > 1:
        print(f"all {len(args.pages)} pages: {totals.get('found', 0)} examples found, {totals.get('run', 0)} run, "
              f"{totals.get('setup', 0)} set-up steps not run, {totals.get('skipped', 0)} skipped, "
              f"{totals.get('failed', 0)} failed, {time.monotonic() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
