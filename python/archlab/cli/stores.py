"""The result store and run ids as the CLI's verbs take them (``--store DIR``, ``RUN_ID``),
checked where the user's words are known: a file given as a store, a catalog that does not
open or an unknown run id is refused naming the option, before the store is touched."""

from __future__ import annotations

from pathlib import Path

import duckdb

from archlab.errors import SpecError, StoreError
from archlab.store import CATALOG_FILE, Store


def open_store(directory: str | Path) -> Store:
    """The result store of ``--store``: a directory (made when missing) whose catalog, if there
    is one, opens. Checked here so that a file, or a directory holding something else, is named
    as the option the user wrote instead of failing deep inside the store."""
    path = Path(directory)
    allowed = f"a result store directory (made when missing) with a DuckDB catalog {CATALOG_FILE}"
    if path.exists() and not path.is_dir():
        raise SpecError("--store", allowed, str(directory), "not a directory")
    store = Store(path)
    if (path / CATALOG_FILE).exists():
        try:
            store.runs()
        except (StoreError, duckdb.Error) as e:  # DuckDB's own when the file opens but is cut short
            raise SpecError("--store", allowed, str(directory), _first_line(str(e))) from None
    return store


def known_run(store: Store, run_id: str, what: str = "RUN_ID") -> str:
    """``run_id`` when the store's catalog lists it."""
    if not (store.root / CATALOG_FILE).exists() or store.catalog.run(run_id) is None:
        raise SpecError(what, f"a run id of the store {store.root} (`archlab runs --store {store.root}` lists them)", run_id)
    return run_id


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
