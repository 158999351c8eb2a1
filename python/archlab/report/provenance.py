"""What the report says about where its numbers come from, read from a run's manifest.

The manifest (``archlab/run-manifest``, written by :mod:`archlab.store.manifest`) keeps the
validated spec under ``spec``, the code state under ``git`` and the load model under
``load_model``. This module turns it into the few display strings the report header needs, and
is the only part of the report that knows the manifest's layout; a fact the manifest lacks is
shown as missing, never guessed. An older flat layout (``experiment`` as the spec itself,
``git_revision`` as a string) is read too, so reports of any stored run can be regenerated.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass

from archlab.report.formatting import MISSING

__all__ = ["Provenance", "provenance"]

Manifest = Mapping[str, object]


@dataclass(frozen=True)
class Provenance:
    name: str
    description: str | None
    run_id: str
    status: str | None
    started: str
    protocol: str
    git_revision: str
    build: str
    kernel: str
    cpu_model: str
    placement: str
    spec_hash: str
    load_model: str


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _spec(manifest: Manifest) -> Mapping[str, object]:
    experiment = manifest.get("experiment")
    return experiment if isinstance(experiment, Mapping) else _mapping(manifest.get("spec"))


def _text(value: object) -> str:
    return MISSING if value in (None, "") else str(value)


def _when(started_at: object) -> str:
    if not started_at:
        return MISSING
    try:
        moment = _dt.datetime.fromisoformat(str(started_at))
    except ValueError:
        return str(started_at)
    zone = moment.strftime(" %Z") if moment.tzinfo else ""
    return moment.strftime("%Y-%m-%d %H:%M:%S") + zone


def _seconds(value: object) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} s"
    return _text(value)


def _protocol(spec: Mapping[str, object]) -> str:
    repetitions = spec.get("repetitions")
    noun = "repetition" if repetitions == 1 else "repetitions"
    return (
        f"{_text(repetitions)} {noun} per cell · "
        f"{_seconds(spec.get('warmup_s'))} warm-up · {_seconds(spec.get('duration_s'))} measured"
    )


def _git_revision(manifest: Manifest) -> str:
    if manifest.get("git_revision"):
        return str(manifest["git_revision"])
    git = _mapping(manifest.get("git"))
    revision = _text(git.get("revision"))
    # A dirty work tree means the revision alone does not reproduce the run; say so.
    return f"{revision} (uncommitted changes)" if git.get("dirty") else revision


def _build(manifest: Manifest) -> str:
    parts = [
        f"archlab-engine {manifest['engine_version']}" if manifest.get("engine_version") else "",
        f"{manifest['build_profile']} build" if manifest.get("build_profile") else "",
    ]
    return " · ".join(p for p in parts if p) or MISSING


def _cpu_list(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or MISSING
    return _text(value)


def _placement(manifest: Manifest, spec: Mapping[str, object]) -> str:
    placement = _mapping(manifest.get("placement")) or _mapping(spec.get("placement"))
    if not placement:
        return MISSING
    return (
        f"server on CPU {_cpu_list(placement.get('server_cpus'))} · "
        f"load generator on CPU {_cpu_list(placement.get('client_cpus'))}"
    )


def _load_model(manifest: Manifest, spec: Mapping[str, object]) -> str:
    model = manifest.get("load_model") or _mapping(spec.get("load")).get("model")
    return _text(model)


def provenance(manifest: Manifest) -> Provenance:
    spec = _spec(manifest)
    name = spec.get("name") or manifest.get("experiment")
    description = spec.get("description")
    return Provenance(
        name=str(name) if isinstance(name, str) and name else "experiment",
        description=str(description) if description else None,
        run_id=_text(manifest.get("run_id")),
        status=str(manifest["status"]) if manifest.get("status") else None,
        started=_when(manifest.get("started_at")),
        protocol=_protocol(spec),
        git_revision=_git_revision(manifest),
        build=_build(manifest),
        kernel=_text(manifest.get("kernel")),
        cpu_model=_text(manifest.get("cpu_model")),
        placement=_placement(manifest, spec),
        spec_hash=_text(manifest.get("spec_hash")),
        load_model=_load_model(manifest, spec),
    )
