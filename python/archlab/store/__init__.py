"""The result store: run directories with their manifests and raw outputs, and the DuckDB
catalog with one row per cell and repetition. Reports and analyses read only from here."""

from archlab.store.catalog import RESULT_COLUMNS, Catalog
from archlab.store.manifest import EngineFacts
from archlab.store.records import CellRecord, Measurement, ServerCost
from archlab.store.runs import CATALOG_FILE, RunHandle, RunInfo, Store

__all__ = [
    "CATALOG_FILE",
    "RESULT_COLUMNS",
    "Catalog",
    "CellRecord",
    "EngineFacts",
    "Measurement",
    "RunHandle",
    "RunInfo",
    "Store",
    "ServerCost",
]
