"""Runs compared with runs: cell by cell, did throughput and latency change between two stored
runs, by how much, and is the change larger than what the repetitions' spread explains
(:func:`compare_runs`, :mod:`archlab.compare.diff`); rendered as a terminal table and a
self-contained HTML page (:mod:`archlab.compare.render`); ``archlab compare`` is its CLI."""

from archlab.compare.diff import Comparison, MetricChange, CellComparison, compare_runs

__all__ = ["CellComparison", "Comparison", "MetricChange", "compare_runs"]
