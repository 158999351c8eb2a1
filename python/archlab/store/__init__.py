"""The result store: run directories with their manifests and raw outputs, and the DuckDB
catalog with one row per cell and repetition. Reports and analyses read only from here, as
typed values: :meth:`Store.load_run` returns a :class:`RunView` of a :class:`Manifest` and
:class:`ResultRow` s. Experiments and simulations are written through one API
(:meth:`Store.begin_run`, :meth:`RunWriter.record`)."""

from archlab.littles_law import LittlesLaw
from archlab.store.catalog import RESULT_COLUMNS, Catalog
from archlab.store.manifest import EngineFacts, Manifest
from archlab.store.records import CellKey, CellRecord, Measurement, ServerCost
from archlab.store.rows import ResultRow
from archlab.store.runs import CATALOG_FILE, RunHandle, RunInfo, RunPlan, RunView, RunWriter, Store
from archlab.store.summary import LoadSummary, SummaryError, read_summary

__all__ = [
    "CATALOG_FILE",
    "RESULT_COLUMNS",
    "Catalog",
    "CellKey",
    "CellRecord",
    "EngineFacts",
    "LittlesLaw",
    "LoadSummary",
    "Manifest",
    "Measurement",
    "ResultRow",
    "RunHandle",
    "RunInfo",
    "RunPlan",
    "RunView",
    "RunWriter",
    "Store",
    "ServerCost",
    "SummaryError",
    "read_summary",
]
