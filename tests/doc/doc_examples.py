"""The examples of a Markdown page: its fenced shell blocks, split into commands, with the doctest
directives written before them (tests/doc/README.md). Pure: text in, examples or errors out."""
import dataclasses
import re
import subprocess

SHELL_LANGS = {"sh", "bash", "shell", "console", "shell-session"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")
DIRECTIVE = re.compile(r"^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$")
DIRECTIVE_BODY = re.compile(r'^(\w+)(?:\s+(\d+)s?)?(?:\s+"([^"]*)")?\s*(?::\s*(.*))?$')
VERBS_NEEDING_REASON = {"skip", "setup", "stop", "retry", "cleans"}
VERBS = VERBS_NEEDING_REASON | {"exit", "output", "exact", "timeout"}
# What an untested command looks like outside a shell fence (an indented block, an untagged fence).
COMMAND_LIKE = re.compile(r"^\s*(\$ |gpulane(-web)? |\./|sudo |cd |export |curl |ssh |python3? |pip |cmake |ctest |git "
                          r"|[\w.-]+/[\w./-]+ )")


@dataclasses.dataclass
class Directive:
    verb: str
    number: int | None
    text: str | None  # the command text it applies to; None: every command of the block
    reason: str
    line: int
    used: bool = False


@dataclasses.dataclass
class Example:
    line: int  # 1-based line of the page where the command starts
    command: str
    output: list[str] | None  # what the page shows it printing (console blocks), None: nothing shown
    skip: str | None = None  # the reason it is not run here
    setup: str | None = None  # the reason it is a set-up step (not run here)
    exit_code: int = 0
    stop_s: int | None = None  # run this long, then Ctrl-C (SIGINT); it must still be running
    retry_s: int | None = None  # run again until it succeeds, this long at most
    timeout_s: int | None = None
    check_output: bool = False  # the lines shown must be printed (digits and spacing aside)
    exact_output: bool = False  # ... digits included (job ids, GPU indices)
    cleans: bool = False  # afterwards the working and temporary folders hold only what they held before the page


def parse_directive(body, line):
    m = DIRECTIVE_BODY.match(body)
    if not m or m.group(1) not in VERBS:
        raise ValueError(f"{line}: doctest directive '{body}' is not one of: "
                         'skip: WHY | setup: WHY | skip "TEXT": WHY | exit N ["TEXT"] | stop Ns ["TEXT"]: WHY '
                         '| retry Ns ["TEXT"]: WHY | timeout Ns ["TEXT"] | output ["TEXT"] | exact ["TEXT"] '
                         '| cleans ["TEXT"]: WHY')
    verb, number, text, reason = m.group(1), m.group(2), m.group(3), (m.group(4) or "").strip()
    if verb in VERBS_NEEDING_REASON and not reason:
        raise ValueError(f"{line}: doctest directive '{body}' needs a reason after a colon")
    if verb in {"exit", "stop", "retry", "timeout"} and number is None:
        raise ValueError(f"{line}: doctest directive '{body}' needs a number")
    return Directive(verb, int(number) if number else None, text, reason, line)


def command_complete(text):
    """Whether bash would run TEXT as it stands (no open quote, continuation line or here-document)."""
    if text.endswith("\\"):
        return False
    r = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True)
    if "delimited by end-of-file" in r.stderr:
        return False
    if r.returncode != 0 and ("unexpected end of file" in r.stderr or "unexpected EOF" in r.stderr):
        return False
    return True


def split_commands(lines, first_line, console):
    """(line, command, output) for each command of a block; in a console block, commands are the lines
    after '$ ' (and their continuation lines) and the other lines their output."""
    commands, pending, start = [], None, 0
    for offset, raw in enumerate(lines):
        number = first_line + offset
        if pending is not None:
            pending.append(raw)
            if command_complete("\n".join(pending)):
                commands.append([start, "\n".join(pending), []])
                pending = None
            continue
        if console and not raw.startswith("$ "):
            if commands and raw.strip():
                commands[-1][2].append(raw)
            continue
        text = raw[2:] if console else raw
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        start, pending = number, [text]
        if command_complete(text):
            commands.append([start, text, []])
            pending = None
    if pending is not None:
        raise ValueError(f"{start}: the command that starts here never ends (an open quote or here-document)")
    return [(n, c, (o if console and o else None)) for n, c, o in commands]


def apply_directives(example, directives):
    for d in directives:
        if d.text is not None and d.text not in example.command:
            continue
        d.used = True
        if d.verb == "skip":
            example.skip = d.reason
        elif d.verb == "setup":
            example.setup = d.reason
        elif d.verb == "exit":
            example.exit_code = d.number
        elif d.verb == "stop":
            example.stop_s = d.number
        elif d.verb == "retry":
            example.retry_s = d.number
        elif d.verb == "timeout":
            example.timeout_s = d.number
        elif d.verb == "output":
            example.check_output = True
        elif d.verb == "exact":
            example.check_output = example.exact_output = True
        elif d.verb == "cleans":
            example.cleans = True


def check_untested(line, number, in_indented, errors):
    if in_indented and COMMAND_LIKE.match(line):
        errors.append(f"{number}: a command in an indented code block, which the doc tests cannot see: "
                      "fence it (```sh, or ```console with '$ ' before commands; ```text if it is not run)")


def parse_page(text):
    """(examples, errors) of a page. Errors: malformed or unused directives, commands the tests cannot
    see (indented blocks, untagged fences with commands)."""
    examples, errors, directives = [], [], []
    lines = text.split("\n")
    i, prev_blank = 0, True
    while i < len(lines):
        line, number = lines[i], i + 1
        m = DIRECTIVE.match(line)
        if m:
            try:
                directives.append(parse_directive(m.group(1), number))
            except ValueError as e:
                errors.append(str(e))
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            i = read_block(lines, i, fence, directives, examples, errors)
            directives, prev_blank = [], False
            continue
        if directives and line.strip():
            errors.append(f"{directives[0].line}: doctest directive not followed by a code block")
            directives = []
        indented = line.startswith("    ") and (prev_blank or COMMAND_LIKE.match(lines[i - 1] if i else ""))
        check_untested(line, number, indented, errors)
        prev_blank = not line.strip()
        i += 1
    return examples, errors


def read_block(lines, i, fence, directives, examples, errors):
    indent, marker, lang = fence.group(1), fence.group(2), fence.group(3).lower()
    body, j = [], i + 1
    while j < len(lines) and not lines[j].strip().startswith(marker[0] * len(marker)):
        body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
        j += 1
    if lang not in SHELL_LANGS:
        if not lang and any(COMMAND_LIKE.match(b) for b in body):
            errors.append(f"{i + 1}: an untagged code block with commands, which the doc tests cannot see: "
                          "tag it ```sh or ```console (```text if it is not run)")
        if directives:
            errors.append(f"{directives[0].line}: doctest directive before a block that is not a shell block")
        return j + 1
    try:
        parts = split_commands(body, i + 2, lang in {"console", "shell-session"})
    except ValueError as e:
        errors.append(str(e))
        return j + 1
    for number, command, output in parts:
        example = Example(number, command, output)
        apply_directives(example, directives)
        examples.append(example)
    for d in directives:
        if not d.used:
            errors.append(f'{d.line}: doctest directive names "{d.text}", which no command of the block has')
    return j + 1
