#!/usr/bin/env python3
"""Counts the tests that start the gpulane daemon binary (issue 25, item 6), by file.

A test counts when its body, its fixture or a file-local helper it names (followed to a fixed
point) mentions TestDaemon or WebDaemon (tests/support/daemon_fixture.h, web_daemon.h): each
starts `gpulane daemon` as a child process. Static, so a test that names a fixture without
starting it still counts (DaemonOptions{.start = false} tests are few).
Run: python3 bench/count_binary_daemon_tests.py [tests/integration]
"""
import re
import sys
from pathlib import Path

SEEDS = {"TestDaemon", "WebDaemon"}
TEST_RE = re.compile(r"^(TEST|TEST_F|TEST_P)\((\w+),\s*(\w+)\)")
NAME_RE = re.compile(r"^(?:class|struct)\s+(\w+)|^[\w:<>,\s\*&]+?[\s\*&](\w+)\s*\(")


def blocks(text):
    """Top-level chunks: each starts at a line beginning with a non-space, non-brace character."""
    cur = []
    for line in text.splitlines():
        if line and not line[0].isspace() and line[0] not in "}/#{" and cur:
            yield "\n".join(cur)
            cur = []
        cur.append(line)
    if cur:
        yield "\n".join(cur)


def words(chunk):
    return set(re.findall(r"\w+", chunk))


def count(path):
    chunks = list(blocks(path.read_text()))
    names = set(SEEDS)
    changed = True
    while changed:
        changed = False
        for c in chunks:
            if TEST_RE.match(c):
                continue
            m = NAME_RE.match(c)
            name = m and (m.group(1) or m.group(2))
            if name and name not in names and words(c) & names:
                names.add(name)
                changed = True
    n = 0
    for c in chunks:
        m = TEST_RE.match(c)
        if m and (m.group(2) in names or words(c) & names):
            n += 1
    return n


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/integration")
    total = 0
    rows = [(count(p), p) for p in sorted(root.glob("*_test.cc"))]
    for n, p in sorted(rows, key=lambda r: (-r[0], str(r[1]))):
        if n:
            print(f"{n:4d} {p}")
            total += n
    print(f"{total:4d} total")


if __name__ == "__main__":
    main()
