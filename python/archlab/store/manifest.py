"""The facts a run directory's ``manifest.json`` records so that a result can be traced and
reproduced: the validated spec, its hash and its raw text; the code (git revision and whether the
work tree had uncommitted changes), the engine's version and build profile; the machine (kernel,
CPU model and count, hostname) and where server and client were pinned; the tool versions.
Each fact is gathered defensively: a missing one is recorded as ``null``, never a crash.

Every kind of run (an experiment of real processes, a simulation) shares the machine and code
facts (:func:`machine_facts`) and adds its own (:func:`experiment_facts`, ``archlab.sim.record``).
Readers get a :class:`Manifest`: the facts they use as typed fields (the one place that knows
the file's layout, older layouts included) and the whole document beside them."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

import archlab
from archlab.spec.model import Experiment
from archlab.spec.systems import column_sources

MANIFEST_SCHEMA = "archlab/run-manifest"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class EngineFacts:
    version: str
    build_profile: str  # release | debug | installed


RunKind = Literal["experiment", "simulation"]


def machine_facts() -> dict:
    """The code and machine a run ran on: what every manifest records."""
    return {
        "git": git_state(Path(archlab.__file__).parent),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": sorted(os.sched_getaffinity(0)),
        "hostname": socket.gethostname(),
        "tools": tool_versions(),
    }


def experiment_facts(experiment: Experiment, engine: EngineFacts | None) -> dict:
    """What an experiment's manifest adds: the engine that ran it and where it was pinned; with
    ``[[systems]]``, where each architecture level's columns come from and which levels are
    remote targets (load and latency only)."""
    facts: dict[str, Any] = {
        "build_profile": engine.build_profile if engine else None,
        "engine_version": engine.version if engine else None,
        "placement": {
            "server_cpus": experiment.placement.server_cpu_list,
            "client_cpus": experiment.placement.client_cpu_list,
        },
        "spec": experiment.to_dict(),
    }
    if experiment.systems:
        levels = [str(a) for f in experiment.factors if f.name == "architecture" for a in f.levels]
        facts["column_sources"] = {level: column_sources(level, experiment.systems) for level in levels}
        facts["remote_targets"] = {s.level: s.target.url for s in experiment.systems if s.target is not None}
    return facts


@dataclass(frozen=True)
class Manifest:
    """A run's ``manifest.json`` as readers use it, with the catalog's ``status`` and
    ``finished_at``. ``spec`` is the validated spec as recorded (an experiment's, or a
    simulation's model and settings); ``document`` is the whole file."""

    run_id: str
    kind: RunKind
    #: The experiment's (or simulation's) name.
    name: str
    description: str | None
    started_at: str | None  # ISO 8601, UTC
    status: str | None  # running | complete | interrupted | failed
    finished_at: str | None
    load_model: str | None
    cells: tuple[str, ...]
    repetitions: int | None
    warmup_s: float | None
    duration_s: float | None
    spec_hash: str | None
    spec_text: str | None
    git_revision: str | None
    git_dirty: bool | None
    engine_version: str | None
    build_profile: str | None
    kernel: str | None
    cpu_model: str | None
    #: CPU lists as the spec writes them ("2-3,5"); None when not recorded.
    server_cpus: str | None
    client_cpus: str | None
    spec: Mapping[str, Any] = field(default_factory=dict)
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], status: str | None = None,
                      finished_at: str | None = None) -> "Manifest":
        """Read ``doc`` (also the older flat layout: ``experiment`` holding the spec itself,
        ``git_revision`` a string); a fact it lacks is None."""
        spec = _mapping(doc.get("experiment")) or _mapping(doc.get("spec"))
        git = _mapping(doc.get("git"))
        placement = _mapping(doc.get("placement")) or _mapping(spec.get("placement"))
        load = _mapping(spec.get("load"))
        name = spec.get("name") or (doc.get("experiment") if isinstance(doc.get("experiment"), str) else None)
        return cls(
            run_id=str(doc.get("run_id") or ""),
            kind="simulation" if doc.get("kind") == "simulation" else "experiment",
            name=str(name) if name else "experiment",
            description=_text(spec.get("description")),
            started_at=_text(doc.get("started_at")),
            status=status if status is not None else _text(doc.get("status")),
            finished_at=finished_at if finished_at is not None else _text(doc.get("finished_at")),
            load_model=_text(doc.get("load_model") or load.get("model")),
            cells=tuple(str(c) for c in doc.get("cells") or ()),
            repetitions=_int(doc.get("repetitions") or spec.get("repetitions")),
            warmup_s=_number(spec.get("warmup_s")),
            duration_s=_number(spec.get("duration_s")),
            spec_hash=_text(doc.get("spec_hash")),
            spec_text=_text(doc.get("spec_text")),
            git_revision=_text(doc.get("git_revision") or git.get("revision")),
            git_dirty=git.get("dirty") if isinstance(git.get("dirty"), bool) else None,
            engine_version=_text(doc.get("engine_version")),
            build_profile=_text(doc.get("build_profile")),
            kernel=_text(doc.get("kernel")),
            cpu_model=_text(doc.get("cpu_model")),
            server_cpus=_cpus(placement.get("server_cpus")),
            client_cpus=_cpus(placement.get("client_cpus")),
            spec=spec,
            document=doc,
        )  # fmt: skip


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return None if value in (None, "") else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _cpus(value: object) -> str | None:
    """A CPU list as text: "2-3,5" stays, a list [1, 2] (older manifests) becomes "1,2"."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or None
    return _text(value)


def git_state(where: Path) -> dict:
    """Revision and dirty flag of the checkout containing ``where`` (read-only git commands)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"revision": revision, "dirty": None if status is None else bool(status)}


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def tool_versions() -> dict:
    versions: dict[str, str | None] = {"python": platform.python_version(), "archlab": archlab.__version__}
    for module in ("duckdb", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = None
    return versions
