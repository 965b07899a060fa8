#!/usr/bin/env python3
"""Size rules of src/ (issue 25): no file over 600 lines and no function over 80 lines, unless
scripts/size-exceptions.txt names it with a reason. Prints each breach (and each exception no
longer needed) on one line and exits 1; prints nothing and exits 0 when the tree keeps the rules.

  scripts/check-sizes.py SRC_DIR            the check (ctest ArchitectureSizes)
  scripts/check-sizes.py --report SRC_DIR   every file over 400 lines and function over 50, largest
                                            first, exceptions included (for a closing note)

A function is a brace block opened at namespace level (outside any other block, class bodies
included), after a line that is not a class, struct, enum, union, namespace or extern block; its
length is the lines from its first line to its closing brace. Strings, characters and comments are
skipped when braces are counted. It is a measure for people, not a parser: a lambda inside a
function counts toward that function.
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / 'lib'))
import src_check  # noqa: E402

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
TYPE_BLOCK = re.compile(r'\b(class|struct|enum|union|namespace)\b[^;()]*$|\bextern\s*$')  # "C" is blanked


def function_name(signature):
    """The qualified name before the parameter list: 'LeaseWaiter::Acquire'."""
    angle = 0
    for i, ch in enumerate(signature):
        if ch == '<':
            angle += 1
        elif ch == '>':
            angle = max(0, angle - 1)
        elif ch == '(' and angle == 0:
            m = re.search(r'([A-Za-z_~][\w:~]*(?:operator\s*\S+)?)\s*$', signature[:i])
            return m.group(1) if m else signature[:i].strip()[-60:]
    return signature.strip()[-60:]


def strip_code(text):
    """The text with string and character literals and comments blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(''.join(ch if ch == '\n' else ' ' for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ')' + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(''.join(ch if ch == '\n' else ' ' for ch in text[i:j]))
            i = j
        elif c in '"\'':
            # a digit separator (1'000) is not a character literal
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(' ' * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(path):
    """(name line, first line number, length in lines) of each function body in the file."""
    code = strip_code(path.read_text(errors='replace'))
    lines = code.split('\n')
    stack = []  # for each open brace: 'type' or 'function' or 'inner'
    found = []
    head = ''
    start = None
    for number, line in enumerate(lines, 1):
        for col, ch in enumerate(line):
            if ch == '{':
                before = (head + ' ' + line[:col]).strip()
                in_function = any(kind in ('function', 'inner') for kind in stack)
                if in_function:
                    stack.append('inner')
                elif TYPE_BLOCK.search(before) or before.endswith('=') or not before:
                    stack.append('type')
                else:
                    stack.append('function')
                    start = number
                    name = function_name(before.split(';')[-1])
                head = ''
            elif ch == '}':
                kind = stack.pop() if stack else 'type'
                if kind == 'function':
                    found.append((name[-100:], start, number - start + 1))
                head = ''
            elif ch == ';' and (not stack or stack[-1] == 'type'):
                head = ''
        if not stack or stack[-1] == 'type':
            head = (head + ' ' + line).strip()[-400:] if '{' not in line and '}' not in line else ''
    return found


def read_exceptions(path):
    exceptions = {}
    if path.exists():
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith('#'):
                continue
            key, _, reason = line.partition(' -- ')
            if not reason.strip():
                sys.exit(f'{path}: "{line}" gives no reason (write: PATH[:FUNCTION START LINE] -- why)')
            exceptions[key.strip()] = reason.strip()
    return exceptions


def grew(reason, n):
    """True when an exception's reason states a size ("117 lines") that n now exceeds."""
    m = re.search(r'(\d+) lines', reason)
    return bool(m) and n > int(m.group(1))


def main():
    report, src, root = src_check.parse_args('check-sizes.py')
    exceptions = read_exceptions(root / 'scripts' / 'size-exceptions.txt')
    used = set()
    breaches, rows = [], []
    for rel, path in src_check.cpp_files(src, root):
        n = len(path.read_text(errors='replace').splitlines())
        rows.append((n, 'file', rel, ''))
        if n > MAX_FILE_LINES:
            if rel in exceptions:
                used.add(rel)
                if grew(exceptions[rel], n):
                    breaches.append(f'{rel}: {n} lines, more than scripts/size-exceptions.txt allows it: split it')
            else:
                breaches.append(f'{rel}: {n} lines, over {MAX_FILE_LINES} (split it, or name it in scripts/size-exceptions.txt with a reason)')
        for name, start, length in functions(path):
            rows.append((length, 'function', f'{rel}:{start}', name))
            if length > MAX_FUNCTION_LINES:
                key = f'{rel}:{name}'
                if key in exceptions:
                    used.add(key)
                    if grew(exceptions[key], length):
                        breaches.append(f'{rel}:{start}: function {name} has {length} lines, more than '
                                        'scripts/size-exceptions.txt allows it: split it')
                else:
                    breaches.append(f'{rel}:{start}: function {name} has {length} lines, over {MAX_FUNCTION_LINES} '
                                    f'(split it, or name "{key}" in scripts/size-exceptions.txt with a reason)')
    if report:
        for n, kind, where, name in sorted(rows, reverse=True):
            if (kind == 'file' and n > 400) or (kind == 'function' and n > 50):
                print(f'{n:5d}  {kind:8s}  {where}  {name[:70]}')
        return 0
    for key in sorted(set(exceptions) - used):
        breaches.append(f'scripts/size-exceptions.txt: "{key}" keeps the rules now: remove its line')
    for b in breaches:
        print(b)
    return 1 if breaches else 0


if __name__ == '__main__':
    sys.exit(main())
