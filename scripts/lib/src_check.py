"""What scripts/check-sizes.py and scripts/check-seams.py share: their command line
(`[--report] SRC_DIR`) and the walk over src/'s C++ files."""
import sys
from pathlib import Path


def parse_args(name):
    """(report?, src folder, repository root) from `NAME [--report] SRC_DIR`."""
    args = sys.argv[1:]
    report = bool(args) and args[0] == '--report'
    if report:
        args = args[1:]
    if len(args) != 1:
        sys.exit(f'usage: {name} [--report] SRC_DIR')
    src = Path(args[0])
    return report, src, src.parent


def cpp_files(src, root):
    """(path relative to the root, Path) of every .cc and .h file below src, in order."""
    for path in sorted(src.rglob('*')):
        if path.suffix in ('.cc', '.h') and path.is_file():
            yield path.relative_to(root).as_posix(), path
