"""The control plane's view of the data plane: where the ``archlab-engine`` binary is, what it
says about itself, what each process of a cell is given (:func:`serve_options`, a server's
options, and :func:`load_params`, a load run's parameters, each checked and normalised by the
data plane, as the JSON ``serve --options`` and ``load --params`` read) and the command lines
that start them (the one place in Python that spells them).
:class:`DataPlaneRegistry` (defined with the spec, re-exported here) answers spec validation's
questions (architectures, workload check) through the ``archlab._native`` extension, a required part of the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from archlab import contract
from archlab.errors import EngineNotFound, ProcessFailed
from archlab.spec.model import Cell, DbSettings, Experiment, Placement
from archlab.spec.registry import ArchitectureInfo
from archlab.spec.registry import DataPlaneRegistry as DataPlaneRegistry  # re-exported: its home is the spec

ENGINE_ENV = "ARCHLAB_ENGINE"
BINARY = "archlab-engine"
_BUILD_HINT = "run `make build` (or `cargo build --release -p archlab-engine`)"


def repo_root() -> Path | None:
    """The source checkout this package was imported from (``<repo>/python/archlab/...``), if any."""
    candidate = Path(__file__).resolve().parents[3]
    return candidate if (candidate / "Cargo.toml").is_file() and (candidate / "crates").is_dir() else None


def find_engine() -> Path:
    """``$ARCHLAB_ENGINE``, else ``<repo>/target/release/archlab-engine``, else ``PATH``."""
    explicit = os.environ.get(ENGINE_ENV)
    if explicit:
        p = Path(explicit)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise EngineNotFound(f"{ENGINE_ENV}={explicit} is not an executable file; unset it or {_BUILD_HINT}")
    root = repo_root()
    if root is not None:
        built = root / "target" / "release" / BINARY
        if built.is_file() and os.access(built, os.X_OK):
            return built
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    raise EngineNotFound(f"{BINARY} is not built: {_BUILD_HINT}; looked in ${ENGINE_ENV}, target/release/ and PATH")


@dataclass(frozen=True)
class Engine:
    path: Path

    @classmethod
    def locate(cls) -> "Engine":
        return cls(find_engine())

    def _query(self, *args: str) -> str:
        try:
            done = subprocess.run([str(self.path), *args], capture_output=True, text=True, timeout=30)
        except OSError as e:
            raise EngineNotFound(f"cannot execute {self.path}: {e}; {_BUILD_HINT}") from None
        except subprocess.TimeoutExpired:
            raise ProcessFailed(f"{BINARY} {' '.join(args)}", "did not answer within 30 s") from None
        if done.returncode != 0:
            raise ProcessFailed(f"{BINARY} {' '.join(args)}", f"exited with code {done.returncode}", done.stderr[-2000:])
        return done.stdout

    @cached_property
    def version(self) -> str:
        """``archlab-engine --version`` without the program name, e.g. ``0.1.0``."""
        out = self._query("--version").strip()
        return out.split()[-1] if out else "unknown"

    @property
    def build_profile(self) -> str:
        """``release`` or ``debug`` for a binary under ``target/``, else ``installed``."""
        parent = self.path.resolve().parent
        return parent.name if parent.parent.name == "target" and parent.name in ("release", "debug") else "installed"

    def architectures(self) -> tuple[ArchitectureInfo, ...]:
        try:
            items = json.loads(self._query("architectures", "--json"))
        except json.JSONDecodeError as e:
            raise ProcessFailed(f"{BINARY} architectures --json", f"printed invalid JSON ({e})") from None
        return tuple(ArchitectureInfo.from_mapping(item) for item in items)

    def serve_argv(self, architecture: str, options_path: Path, host: str = "127.0.0.1") -> list[str]:
        """``serve`` of ``architecture`` on a free port of ``host`` (loopback unless the cell
        runs over a link), with the options of the JSON file ``options_path`` (written from
        :func:`serve_options`)."""
        return [
            str(self.path), "serve",
            "--arch", architecture,
            "--host", host,
            "--port", "0",
            "--options", str(options_path),
        ]  # fmt: skip

    def load_argv(self, params_path: Path, json_path: Path, hdr_path: Path) -> list[str]:
        """``load`` with the parameters of the JSON file ``params_path`` (written from
        :func:`load_params`), its summary and interval log written to ``json_path`` and
        ``hdr_path``."""
        return [str(self.path), "load", "--params", str(params_path), "--json", str(json_path), "--hdr-log", str(hdr_path)]


def serve_options(
    cell: Cell, placement: Placement, downstream: str | None = None, db: str | None = None, db_settings: DbSettings | None = None
) -> dict:
    """The options of the server of ``cell``, checked and normalised by the data plane (the JSON
    object ``archlab-engine serve --options`` reads): the spec's ``[server]`` options and
    levels, the server CPUs, and the services the workload uses: ``downstream`` (HOST:PORT of
    the service ``/call`` calls) and ``db`` (the ``postgresql://`` URL of ``/db``'s database,
    with the pool and wait of ``db_settings``, the spec's ``[db]``)."""
    options: dict[str, object] = dict(cell.server_options)
    if cell.threads is not None:
        options["threads"] = cell.threads
    if cell.loops is not None:
        options["loops"] = cell.loops
    options["cpus"] = placement.server_cpu_list
    if downstream is not None:
        options["downstream"] = downstream
    if db is not None:
        settings = db_settings or DbSettings.defaults()
        options.update(db=db, db_pool=settings.pool, db_wait_ms=settings.wait_ms)
    return contract.check_server(cell.architecture, options)


def load_params(
    cell: Cell, experiment: Experiment, target: str | None = None, repetition: int = 1, records_path: Path | None = None
) -> dict:
    """The load generator's parameters of one cell and repetition, checked and normalised by the
    data plane (the JSON object ``archlab-engine load --params`` reads): the spec's
    (:meth:`Experiment.load_params`), the server's address ``target`` (HOST:PORT), and where to
    stream raw records. When the cell draws at random (arrivals, session lengths, think times,
    as the data plane decides), the seed is the spec's seed, else the data plane's default, plus
    the repetition minus one: every repetition draws its own schedule (repetitions measure the
    spread), and a rerun draws the same ones."""
    params = experiment.load_params(cell)
    drawn = contract.check_load(params)
    if "seed" in drawn:
        seed = experiment.load.seed if experiment.load.seed is not None else drawn["seed"]
        params["seed"] = seed + repetition - 1
    if target is not None:
        params["target"] = target
    if records_path is not None:
        params["records"] = str(records_path)
    return contract.check_load(params)


