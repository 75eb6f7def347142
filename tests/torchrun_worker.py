"""`torchrun`'s workers for the DataParallel equivalence tests (`PYTHON_EXEC`), run as devfix
runs scripts.

`torchrun` starts each worker as `$PYTHON_EXEC -u script.py ARGS`. This runs the script as
`__main__` in a fresh interpreter (devfix.vgpu's `run_script_here`, without virtual GPUs) and
ends it as `python -m devfix.vgpu` does (`exit_without_teardown`: threads joined, atexit
handlers run, output flushed, no C++ static destructors). A fresh CPU worker ended by the
interpreter's own teardown aborted now and then after training ("terminate called without an
active exception", about one run in 16 under the suite's load); a crash in the script, in
`destroy_process_group()` or in an atexit handler still fails the run.
"""

from __future__ import annotations

import sys

from devfix.vgpu.__main__ import exit_without_teardown, run_script_here


def main(argv: list[str]) -> None:
    while argv and argv[0].startswith("-"):  # the interpreter's own flags: torchrun gives -u
        if argv.pop(0) == "-u":
            sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
            sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
    exit_without_teardown(run_script_here(argv[0], argv[1:], virtual=False))


if __name__ == "__main__":
    main(sys.argv[1:])
