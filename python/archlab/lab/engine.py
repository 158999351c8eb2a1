"""The control plane's view of the data plane: where the ``archlab-engine`` binary is, what it
says about itself, what each process of a cell is given (:func:`serve_options`: a server's
options, checked and normalised by the data plane, as the JSON ``serve --options`` reads) and the
command lines that start them (the one place in Python that spells them).
:class:`DataPlaneRegistry` (defined with the spec, re-exported here) answers spec validation's
questions through the ``archlab._native`` extension, a required part of the package."""

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
from archlab.spec.units import engine_duration

ENGINE_ENV = "ARCHLAB_ENGINE"
BINARY = "archlab-engine"
# Seed of the open models' schedules when the spec names none (the engine's own default, made
# explicit so the seed of every repetition is recorded in its command line and summary).
DEFAULT_SEED = 24301
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

    def serve_argv(self, architecture: str, options_path: Path) -> list[str]:
        """``serve`` of ``architecture`` on a free loopback port, with the options of the JSON
        file ``options_path`` (written from :func:`serve_options`)."""
        return [
            str(self.path), "serve",
            "--arch", architecture,
            "--host", "127.0.0.1",
            "--port", "0",
            "--options", str(options_path),
        ]  # fmt: skip

    def load_argv(
        self, target: str, cell: Cell, experiment: Experiment, json_path: Path, hdr_path: Path,
        records_path: Path | None = None, repetition: int = 1,
    ) -> list[str]:
        """The ``load`` command of one cell and repetition. When the cell draws at random
        (arrivals, session lengths, think times), the seed is the spec's seed plus the
        repetition minus one: every repetition draws its own schedule (repetitions measure the
        spread), and a rerun draws the same ones."""
        load = experiment.load
        argv = [
            str(self.path),
            "load",
            "--target", target,
            "--path", cell.workload,
        ]  # fmt: skip
        if load.model == "closed":
            assert cell.concurrency is not None
            argv += ["--connections", str(cell.concurrency)]
        else:
            argv += [
                "--model", load.model,
                "--arrivals", str(load.schedule),
                "--connections", str(load.connections),
                "--max-connections", str(load.max_connections),
            ]  # fmt: skip
            if load.model == "open":
                argv += ["--rate", _rate(cell.rate_rps)]
            else:
                assert load.requests_per_session is not None
                argv += [
                    "--session-rate", _rate(cell.session_rate),
                    "--requests-per-session", load.requests_per_session.engine_syntax(),
                    "--session-connection", str(load.session_connection),
                ]  # fmt: skip
        argv += [
            "--duration", engine_duration(experiment.duration_s),
            "--warmup", engine_duration(experiment.warmup_s),
        ]  # fmt: skip
        if load.model != "open":  # the open model has no think time (the engine refuses it)
            argv += ["--think-time", cell.think_time.engine_syntax()]
        if load.is_random_with(cell.think_time):
            argv += ["--seed", str((load.seed if load.seed is not None else DEFAULT_SEED) + repetition - 1)]
        argv += [
            "--timeout", engine_duration(load.timeout_s),
            "--cpus", experiment.placement.client_cpu_list,
            "--json", str(json_path),
            "--hdr-log", str(hdr_path),
        ]  # fmt: skip
        if records_path is not None:
            argv += ["--records", str(records_path)]
        return argv


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


def _rate(value: float | None) -> str:
    """A rate as the engine parses it: plain decimal, never an exponent."""
    assert value is not None and value > 0
    return str(int(value)) if float(value).is_integer() else repr(float(value))


