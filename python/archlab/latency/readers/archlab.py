"""archlab's own results: the load summary JSON of ``archlab-engine load`` and stored runs.

* :func:`read_load_summary`: an ``archlab/load-summary`` document (schema versions 1 and 2,
  ``crates/load/schema/load-summary.schema.json``, read by :mod:`archlab.store.summary`, the one
  reader of load summaries) names the HDR interval log beside it
  (``hdr_log``, relative to the summary's directory); that log holds integer nanoseconds of the
  2xx responses of the measurement window (warm-up excluded), one interval per second. The
  samples are exact bucket counts of that log; their count is checked against ``requests``.
* :func:`read_run_cell`: one cell of a stored run (a run directory, or a run id in a store),
  every repetition's log merged exactly (count vectors add; the buckets of equal-configuration
  HDR histograms coincide, so nothing is approximated); :func:`read_cell_rows` does the same
  from catalog rows read once, opening only the logs (the per-cell work of a run's analysis,
  which ``archlab analyze --cluster`` spreads over workers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archlab.latency.errors import LatencyError
from archlab.latency.readers.hdr import read_hdr_log
from archlab.latency.samples import Samples

if TYPE_CHECKING:
    from archlab.store import ResultRow

SUMMARY_SCHEMA = "archlab/load-summary"
HDR_UNIT = "ns"  # the engine's interval logs record integer nanoseconds


def is_load_summary(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'"{SUMMARY_SCHEMA}"' in head


def read_load_summary(path: str | Path, *, warmup_s: float = 0.0, cooldown_s: float = 0.0,
                      bucket_value: str = "median") -> Samples:
    """The latencies of the run a load summary describes, in ns, from the HDR log it names.

    ``warmup_s``/``cooldown_s`` trim further whole intervals (the engine already excludes its own
    warm-up). Without trimming, the number of samples must equal the summary's ``requests``."""
    from archlab.store.summary import SummaryError, read_summary  # the one reader of load summaries

    path = Path(path)
    try:
        summary = read_summary(path)
    except SummaryError as error:
        raise LatencyError(str(error)) from error
    log_path = summary.hdr_log
    if log_path is None:
        raise LatencyError(f"{path}: the summary names no HDR log (hdr_log is null), so it holds only a few "
                           "percentiles, not a distribution")
    if not log_path.exists():
        raise LatencyError(f"{path}: its HDR log {log_path} does not exist")
    samples = read_hdr_log(log_path, unit=HDR_UNIT, warmup_s=warmup_s, cooldown_s=cooldown_s,
                           bucket_value=bucket_value)
    requests = summary.measurement.requests
    if not warmup_s and not cooldown_s and samples.n != requests:
        raise LatencyError(f"{path}: the HDR log {log_path.name} holds {samples.n} samples but the summary counts "
                           f"{requests} requests")
    return samples


@dataclass(frozen=True)
class RunCell:
    """One cell of a stored run: its merged samples and the repetitions that went in."""
    run_id: str
    cell_id: str
    samples: Samples
    repetitions: tuple[int, ...]


def _store_and_id(run: str | Path, store: str | Path | None):
    from archlab.store import Store  # the store brings DuckDB; only needed for runs

    path = Path(run)
    if path.is_dir() and (path / "manifest.json").exists():
        return Store(path.resolve().parent), path.resolve().name
    if store is None:
        raise LatencyError(f"{run}: not a run directory (no manifest.json); pass store= to look up a run id")
    return Store(store), str(run)


def run_cells(run: str | Path, *, store: str | Path | None = None) -> tuple[str, list[str], list[ResultRow]]:
    """(run id, cell ids in the experiment's order, the store's rows) of a run directory or run id."""
    from archlab.errors import ArchlabError

    handle, run_id = _store_and_id(run, store)
    try:
        view = handle.load_run(run_id)
    except ArchlabError as error:
        raise LatencyError(f"run {run}: {error}") from error
    return run_id, view.cells, view.rows


def read_run_cell(run: str | Path, cell_id: str, *, store: str | Path | None = None,
                  repetitions: list[int] | None = None, warmup_s: float = 0.0, cooldown_s: float = 0.0,
                  bucket_value: str = "median") -> RunCell:
    """The samples of ``cell_id`` in ``run`` (a run directory, or a run id in the store at
    ``store``), every successful repetition (or those listed) merged exactly."""
    run_id, cells, rows = run_cells(run, store=store)
    return read_cell_rows(run_id, cell_id, cells, rows, repetitions=repetitions, warmup_s=warmup_s, cooldown_s=cooldown_s,
                          bucket_value=bucket_value)


def read_cell_rows(run_id: str, cell_id: str, cells: list[str], rows: list[ResultRow], *, repetitions: list[int] | None = None,
                   warmup_s: float = 0.0, cooldown_s: float = 0.0, bucket_value: str = "median") -> RunCell:
    """:func:`read_run_cell` from the run's catalog rows already read (:func:`run_cells`): only
    the HDR logs are opened, so cells can be read in parallel, even on other hosts, without the
    catalog."""
    if cell_id not in cells:
        raise LatencyError(f"run {run_id}: no cell {cell_id!r}; cells: {', '.join(cells)}")
    chosen = [r for r in rows if r.cell_id == cell_id and r.ok and r.hdr_log_path is not None
              and (repetitions is None or r.repetition in repetitions)]
    if not chosen:
        raise LatencyError(f"run {run_id}: cell {cell_id!r} has no successful repetition with an HDR log"
                           + (f" among {repetitions}" if repetitions is not None else ""))
    merged = None
    for row in chosen:
        assert row.hdr_log_path is not None
        part = read_hdr_log(row.hdr_log_path, unit=HDR_UNIT, warmup_s=warmup_s, cooldown_s=cooldown_s,
                            bucket_value=bucket_value)
        requests = row.measurement.requests if row.measurement is not None else None
        if not warmup_s and not cooldown_s and requests is not None and part.n != requests:
            raise LatencyError(f"run {run_id}: cell {cell_id} repetition {row.repetition}: the HDR log holds "
                               f"{part.n} samples but the catalog counts {requests} requests")
        merged = part if merged is None else merged.merge(part)
    assert merged is not None
    return RunCell(run_id, cell_id, merged, tuple(r.repetition for r in chosen))
