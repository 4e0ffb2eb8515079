"""The ``autoplace`` program: :func:`main` before anything heavy is imported.

A Ctrl-C while the command line's modules are still importing (a tenth of a second and
more) ends the program as one anywhere else does: ``autoplace: interrupted``, exit 130,
no traceback. What runs before this module (Python's own start-up) is out of its reach.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run the command line (:func:`autoplace.cli.main.main`) on ``sys.argv``."""
    try:
        from autoplace.cli.main import main as run
    except KeyboardInterrupt:
        print("autoplace: interrupted", file=sys.stderr)
        return 130
    return run()
