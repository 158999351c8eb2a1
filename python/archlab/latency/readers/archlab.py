"""archlab's own results: the load summary JSON of ``archlab-engine load`` and stored runs.

* :func:`read_load_summary`: an ``archlab/load-summary`` document (schema versions 1 and 2,
  ``crates/load/schema/load-summary.schema.json``) names the HDR interval log beside it
  (``hdr_log``, relative to the summary's directory); that log holds integer nanoseconds of the
  2xx responses of the measurement window (warm-up excluded), one interval per second. The
  samples are exact bucket counts of that log; their count is checked against ``requests``.
* :func:`read_run_cell`: one cell of a stored run (a run directory, or a run id in a store),
  every repetition's log merged exactly (count vectors add; the buckets of equal-configuration
  HDR histograms coincide, so nothing is approximated).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from archlab.latency.errors import LatencyError
from archlab.latency.readers.hdr import read_hdr_log
from archlab.latency.samples import Samples

SUMMARY_SCHEMA = "archlab/load-summary"


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

SUMMARY_VERSIONS = (1, 2)
HDR_UNIT = "ns"  # the engine's interval logs record integer nanoseconds


def is_load_summary(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'"{SUMMARY_SCHEMA}"' in head


def load_summary_document(path: str | Path) -> dict:
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, or not JSON
        raise LatencyError(f"{path}: expected an archlab load summary (JSON), got {_clip(str(error))}") from None
    if not isinstance(document, dict) or document.get("schema") != SUMMARY_SCHEMA:
        raise LatencyError(f"{path}: not an archlab load summary (schema {SUMMARY_SCHEMA!r} expected)")
    if document.get("schema_version") not in SUMMARY_VERSIONS:
        raise LatencyError(f"{path}: load summary schema_version {document.get('schema_version')!r} is not one of "
                           f"{SUMMARY_VERSIONS}")
    return document


def read_load_summary(path: str | Path, *, warmup_s: float = 0.0, cooldown_s: float = 0.0,
                      bucket_value: str = "median") -> Samples:
    """The latencies of the run a load summary describes, in ns, from the HDR log it names.

    ``warmup_s``/``cooldown_s`` trim further whole intervals (the engine already excludes its own
    warm-up). Without trimming, the number of samples must equal the summary's ``requests``."""
    path = Path(path)
    document = load_summary_document(path)
    log = document.get("hdr_log")
    if not log:
        raise LatencyError(f"{path}: the summary names no HDR log (hdr_log is null), so it holds only a few "
                           "percentiles, not a distribution")
    log_path = Path(log) if Path(log).is_absolute() else path.parent / log
    if not log_path.exists():
        raise LatencyError(f"{path}: its HDR log {log_path} does not exist")
    samples = read_hdr_log(log_path, unit=HDR_UNIT, warmup_s=warmup_s, cooldown_s=cooldown_s,
                           bucket_value=bucket_value)
    requests = document.get("requests")
    if not warmup_s and not cooldown_s and requests is not None and samples.n != requests:
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


def run_cells(run: str | Path, *, store: str | Path | None = None) -> tuple[str, list[str], list[dict]]:
    """(run id, cell ids in the experiment's order, catalog rows) of a run directory or run id."""
    from archlab.errors import ArchlabError

    handle, run_id = _store_and_id(run, store)
    try:
        manifest, rows = handle.load_run(run_id)
    except ArchlabError as error:
        raise LatencyError(f"run {run}: {error}") from error
    cells = list(dict.fromkeys([*manifest.get("cells", []), *(r["cell_id"] for r in rows)]))
    return run_id, cells, rows


def read_run_cell(run: str | Path, cell_id: str, *, store: str | Path | None = None,
                  repetitions: list[int] | None = None, warmup_s: float = 0.0, cooldown_s: float = 0.0,
                  bucket_value: str = "median") -> RunCell:
    """The samples of ``cell_id`` in ``run`` (a run directory, or a run id in the store at
    ``store``), every successful repetition (or those listed) merged exactly."""
    run_id, cells, rows = run_cells(run, store=store)
    if cell_id not in cells:
        raise LatencyError(f"run {run_id}: no cell {cell_id!r}; cells: {', '.join(cells)}")
    chosen = [r for r in rows if r["cell_id"] == cell_id and r.get("status") == "ok" and r.get("hdr_log_path")
              and (repetitions is None or r["repetition"] in repetitions)]
    if not chosen:
        raise LatencyError(f"run {run_id}: cell {cell_id!r} has no successful repetition with an HDR log"
                           + (f" among {repetitions}" if repetitions is not None else ""))
    merged = None
    for row in chosen:
        part = read_hdr_log(row["hdr_log_path"], unit=HDR_UNIT, warmup_s=warmup_s, cooldown_s=cooldown_s,
                            bucket_value=bucket_value)
        if not warmup_s and not cooldown_s and row.get("requests") is not None and part.n != row["requests"]:
            raise LatencyError(f"run {run_id}: cell {cell_id} repetition {row['repetition']}: the HDR log holds "
                               f"{part.n} samples but the catalog counts {row['requests']} requests")
        merged = part if merged is None else merged.merge(part)
    return RunCell(run_id, cell_id, merged, tuple(r["repetition"] for r in chosen))
