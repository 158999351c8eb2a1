"""The ``archlab`` command: argument parsing in :mod:`archlab.cli.main`, one function per verb in
:mod:`archlab.cli.commands`. Glue only; the work happens in the library."""

from archlab.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
