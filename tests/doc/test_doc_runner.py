#!/usr/bin/env python3
"""The doc-test runner itself (ctest DocTests.Runner): each test writes a small page, runs
run_doc_tests.py on it as ctest does, and checks what it reports. A runner that stopped seeing a
failing example, a missing export or an untested command would pass pages it must fail.

    test_doc_runner.py BUILD_DIR SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD, SOURCE = sys.argv[1], sys.argv[2]
FENCE = "```"


def run_page(text, extra_env=None):
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.md")
        with open(page, "w") as f:
            f.write(textwrap.dedent(text).replace("~~~", FENCE))
        env = dict(os.environ, **(extra_env or {}))
        r = subprocess.run([sys.executable, os.path.join(HERE, "run_doc_tests.py"), "--build", BUILD,
                            "--source", SOURCE, page], capture_output=True, text=True, env=env, timeout=120)
        return r.returncode, r.stdout + r.stderr


class DocRunner(unittest.TestCase):
    def assertFails(self, page, *texts):
        rc, out = run_page(page)
        self.assertEqual(rc, 1, out)
        for t in texts:
            self.assertIn(t, out)

    def assertPasses(self, page, *texts):
        rc, out = run_page(page)
        self.assertEqual(rc, 0, out)
        for t in texts:
            self.assertIn(t, out)

    def test_failing_command_fails_the_page_naming_its_line(self):
        self.assertFails("""
            # t
            ~~~sh
            true
            false
            ~~~
            """, "page.md:5: exit status 1, the page expects 0", "1 failed")

    def test_every_line_runs_and_state_carries_to_later_blocks(self):
        self.assertPasses("""
            ~~~sh
            x=5
            ~~~
            text
            ~~~console
            $ test "$x" = 5 && echo ok
            ok
            ~~~
            """, "2 examples found, 2 run, 0 set-up steps not run, 0 skipped, 0 failed")

    def test_shell_starts_clean_of_the_callers_environment(self):
        rc, out = run_page("""
            ~~~sh
            test -z "$DOCTEST_LEAK" && test "$HOME" != "$CALLER_HOME" && test -n "$FAKE_NVML_STATE"
            case "$GPULANE_SOCKET $GPULANE_LEASE_DIR" in "${HOME%/home}"/*" ${HOME%/home}"/*) ;; *) false ;; esac
            ~~~
            """, {"DOCTEST_LEAK": "x", "CALLER_HOME": os.environ.get("HOME", "/root")})
        self.assertEqual(rc, 0, out)

    def test_a_command_reading_stdin_does_not_eat_the_next(self):
        self.assertPasses("""
            ~~~sh
            cat
            touch after-cat && test -e after-cat
            ~~~
            """, "2 run")

    def test_eval_without_export_gives_the_program_no_gpu(self):
        self.assertFails("""
            ~~~sh
            out='CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID' && eval "$out" && python train.py
            ~~~
            """, "CUDA_VISIBLE_DEVICES is not in my environment")
        self.assertPasses("""
            ~~~console
            $ out='export CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID' && eval "$out" && python train.py
            train.py (doc-test stand-in): CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID
            ~~~
            """)

    def test_skips_and_setup_steps_are_counted_with_their_reasons(self):
        self.assertPasses("""
            <!-- doctest: setup: installs things -->
            ~~~sh
            false
            ~~~
            <!-- doctest: skip "nope": needs a Slurm cluster -->
            ~~~sh
            nope --now
            true
            ~~~
            """, "3 examples found, 1 run, 1 set-up steps not run, 1 skipped", "skipped 1: needs a Slurm cluster")

    def test_directive_without_reason_or_unmatched_is_an_error(self):
        self.assertFails("""
            <!-- doctest: skip -->
            ~~~sh
            true
            ~~~
            """, "needs a reason")
        self.assertFails("""
            <!-- doctest: skip "absent": why -->
            ~~~sh
            true
            ~~~
            """, 'names "absent", which no command of the block has')

    def test_commands_the_tests_cannot_see_are_errors(self):
        self.assertFails("""
            Indented:

                gpulane status
            """, "page.md:4: a command in an indented code block")
        self.assertFails("""
            ~~~
            $ gpulane status
            ~~~
            """, "an untagged code block with commands")

    def test_shown_output_must_be_printed(self):
        self.assertFails("""
            ~~~console
            $ true
            something
            ~~~
            """, "the page shows output, the command printed nothing")
        self.assertFails("""
            <!-- doctest: output -->
            ~~~console
            $ echo 1 2 3
            a 1
            ~~~
            """, "its output differs from the page's")
        self.assertPasses("""
            <!-- doctest: output -->
            ~~~console
            $ printf 'GPU0  12 %%\\nwarning\\nGPU1   7 %%\\n'
            GPU0 3 %
            GPU1 45 %
            ~~~
            """)

    def test_exact_output_compares_digits_too(self):
        self.assertFails("""
            <!-- doctest: exact -->
            ~~~console
            $ echo 13
            12
            ~~~
            """, "its output differs from the page's (spacing aside)")
        self.assertPasses("""
            <!-- doctest: exact -->
            ~~~console
            $ echo '12   a'
            12 a
            ~~~
            """)

    def test_cleans_fails_a_command_that_leaves_what_the_page_made(self):
        page = """
            ~~~sh
            d=$(mktemp -d) && touch gpulane-1.out
            ~~~
            <!-- doctest: cleans: the end removes what the page made -->
            ~~~sh
            rm -rf "$d"{}
            ~~~
            """
        self.assertFails(page.format(""), "it leaves behind what the page made: work/gpulane-1.out")
        self.assertPasses(page.format(" gpulane-1.out"), "0 failed")

    def test_a_command_that_hangs_fails_at_its_limit(self):
        started = time.monotonic()
        self.assertFails("""
            <!-- doctest: timeout 1 -->
            ~~~sh
            sleep 60
            ~~~
            """, "did not finish within 1 s")
        self.assertLess(time.monotonic() - started, 30)

    def test_stop_presses_ctrl_c_on_a_command_that_runs_until_then(self):
        self.assertPasses("""
            <!-- doctest: stop 1: runs until Ctrl-C -->
            ~~~sh
            sh -c 'while :; do echo tick; sleep 0.2; done'
            ~~~
            """)

    def test_a_shell_loop_that_never_ends_stops_the_page_not_the_run(self):
        started = time.monotonic()
        self.assertFails("""
            <!-- doctest: timeout 1 -->
            ~~~sh
            while :; do sleep 0.1; done
            echo never
            ~~~
            """, "did not finish within 1 s", "not run: the page's shell ended at an earlier command")
        self.assertLess(time.monotonic() - started, 30)

    def test_retry_runs_a_command_again_until_it_succeeds(self):
        page = """
            {directive}
            ~~~sh
            test -e tried || {{ touch tried; false; }}
            ~~~
            """
        self.assertPasses(page.format(directive='<!-- doctest: retry 5: the page says "a second later" -->'))
        self.assertFails(page.format(directive=""), "exit status 1, the page expects 0")

    def test_background_processes_are_ended_after_the_page(self):
        marker = f"doctest-background-{os.getpid()}-{time.monotonic_ns()}"
        rc, out = run_page(f"""
            ~~~sh
            sh -c 'sleep 1000; : {marker}' &
            ~~~
            """)
        self.assertEqual(rc, 0, out)
        ps = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        self.assertEqual(ps.stdout.strip(), "", "the page's background process still runs")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])  # then test names, if any
