#!/usr/bin/env python3
"""Writes gpulane's man pages from the binary's own --help and the packaged config file.

usage: gen-man.py GPULANE GPULANE_WEB CONFIG_TOML OUTDIR
OUTDIR/gpulane.1 and OUTDIR/gpulane-SUB.1 (one per subcommand, as git's pages are) by help2man
over `gpulane --help` and `gpulane SUB --help`, so the pages never drift from --help;
OUTDIR/gpulane-web.1 from `gpulane-web --help`; and
OUTDIR/gpulane.toml.5 from packaging/config.toml (every key, its default and its comment); and
a gzipped copy of each (PAGE.gz, as Debian installs them).
Built by src/CMakeLists.txt (target man_pages) when help2man is installed (scripts/setup.sh).
"""
import gzip
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

SEE_ALSO = "[SEE ALSO]\n.BR gpulane (1), {pages}\n.BR gpulane.toml (5);\n/usr/share/doc/gpulane/README.md\n"


def subcommands(binary):
    lines = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout.splitlines()
    subs = []
    for line in lines[lines.index("Subcommands:") + 1:]:
        m = re.match(r"^  (\S+)\s+(.*)$", line)
        if m:
            subs.append((m.group(1), m.group(2)))
    return subs


def help2man(program, name, version, out, include):
    subprocess.run(["help2man", "--no-info", "--no-discard-stderr", f"--name={name}", f"--version-string={version}",
                    f"--include={include}", f"--output={out}", program], check=True)


def esc(text):
    return text.replace("\\", "\\e").replace("-", "\\-").replace('"', "\\(dq")


def config_page(config_text, version):
    out = [f'.TH GPULANE.TOML 5 "" "{esc(version)}" "File Formats"', ".SH NAME",
           "gpulane.toml \\- gpulane's configuration file", ".SH SYNOPSIS",
           "/etc/gpulane/config.toml, ~/.config/gpulane/config.toml", ".SH DESCRIPTION",
           "TOML. The machine's file is read first, then the user's (GPULANE_CONFIG overrides its path); "
           "later files override earlier ones. lease.*, daemon.*, sched.*, limits.*, shares.* and partitions "
           "are taken only from the machine's file. An unknown key or table stops every command with "
           "the file, the line and the fix (exit 2). Each key below with its default or an example value; "
           "the full reference is /usr/share/doc/gpulane/config.md."]
    comment = []
    for line in config_text.splitlines():
        if line.startswith("## "):
            comment.append(line[3:])
        elif m := re.match(r"^#\[(.+)\]$", line):
            out += [".SH", f"[{esc(m.group(1))}]"]
            if comment:
                out += [".PP", esc(" ".join(comment))]
            comment = []
        elif m := re.match(r"^#(\S+) = (.*)$", line):
            out += [".TP", f".B {esc(m.group(1))} = {esc(m.group(2))}"]
            out.append(esc(" ".join(comment)) if comment else "")
            comment = []
    out += [".SH SEE ALSO", ".BR gpulane (1)", ""]
    return "\n".join(out)


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: gen-man.py GPULANE GPULANE_WEB CONFIG_TOML OUTDIR")
    binary, web = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    config, outdir = Path(sys.argv[3]), Path(sys.argv[4])
    outdir.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    subs = subcommands(binary)
    with tempfile.TemporaryDirectory() as tmp:
        pages = ", ".join(f".BR gpulane\\-{s} (1)" for s, _ in subs)
        include = Path(tmp) / "include"
        include.write_text(SEE_ALSO.format(pages=""))
        main_include = Path(tmp) / "main-include"
        main_include.write_text("[SEE ALSO]\n" + ",\n".join(f".BR gpulane\\-{s} (1)" for s, _ in subs) +
                                ",\n.BR gpulane.toml (5);\n/usr/share/doc/gpulane/README.md\n")
        # help2man names the page after the program: a link named gpulane runs the binary as itself.
        link = Path(tmp) / "gpulane"
        link.symlink_to(binary)
        help2man(str(link), "see, choose and lease the GPUs of a shared server", version, outdir / "gpulane.1",
                 main_include)
        help2man(web, "serve gpulane's Prometheus metrics and web dashboard", version, outdir / "gpulane-web.1", include)
        for sub, desc in subs:
            wrapper = Path(tmp) / f"gpulane-{sub}"
            wrapper.write_text(f'#!/bin/sh\nexec "{binary}" {sub} "$@"\n')
            wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
            page = outdir / f"gpulane-{sub}.1"
            help2man(str(wrapper), desc.rstrip("."), version, page, include)
            # help2man takes the name from the usage line ("gpulane run"): name the page as installed.
            text = page.read_text()
            text = re.sub(r'^\.TH GPULANE "1"', f'.TH GPULANE-{sub.upper()} "1"', text, count=1, flags=re.M)
            text = re.sub(r"^gpulane \\- ", f"gpulane\\-{sub} \\- ", text, count=1, flags=re.M)
            page.write_text(text)
    (outdir / "gpulane.toml.5").write_text(config_page(config.read_text(), version))
    # Compressed copies for the package (Debian installs man pages gzipped; -n: no name or time).
    for page in sorted(outdir.glob("*.[15]")):
        with open(page, "rb") as src, gzip.GzipFile(outdir / (page.name + ".gz"), "wb", 9, mtime=0) as dst:
            dst.write(src.read())


if __name__ == "__main__":
    main()
