"""Reports of a run: the terminal table and the self-contained HTML page.

Both are pure functions of what the store holds for a run (its manifest and its rows, one per
cell and repetition), so ``archlab report RUN_ID`` regenerates exactly what ``archlab run``
printed and wrote. :mod:`~archlab.report.aggregate` turns rows into per-cell summaries with
confidence intervals; :mod:`~archlab.report.table`, :mod:`~archlab.report.figures` and
:mod:`~archlab.report.html` present them.
"""

from archlab.report.table import terminal_table

__all__ = ["terminal_table", "write_html"]


def __getattr__(name: str):
    # write_html needs matplotlib, which takes about a second to import; loading it on first
    # use keeps `terminal_table` (printed after every run) light.
    if name == "write_html":
        from archlab.report.html import write_html

        return write_html
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
