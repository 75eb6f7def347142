"""`python -m devfix` is the `devfix` command."""

from devfix.cli import main

main()
