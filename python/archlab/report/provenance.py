"""What the report says about where its numbers come from, read from a run's manifest.

The store reads the manifest (``archlab/run-manifest``, written by :mod:`archlab.store`) into a
typed :class:`~archlab.store.Manifest`, older layouts included; this module turns it into the
few display strings the report header needs. A fact the manifest lacks is shown as missing,
never guessed.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from archlab.report.formatting import MISSING
from archlab.store import Manifest

__all__ = ["Provenance", "provenance"]


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
    network: str = "loopback"


def _text(value: object) -> str:
    return MISSING if value in (None, "") else str(value)


def _when(started_at: str | None) -> str:
    if not started_at:
        return MISSING
    try:
        moment = _dt.datetime.fromisoformat(started_at)
    except ValueError:
        return started_at
    zone = moment.strftime(" %Z") if moment.tzinfo else ""
    return moment.strftime("%Y-%m-%d %H:%M:%S") + zone


def _seconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:g} s"


def _protocol(manifest: Manifest) -> str:
    repetitions = manifest.repetitions
    noun = "repetition" if repetitions == 1 else "repetitions"
    return (
        f"{_text(repetitions)} {noun} per cell · "
        f"{_seconds(manifest.warmup_s)} warm-up · {_seconds(manifest.duration_s)} measured"
    )


def _git_revision(manifest: Manifest) -> str:
    revision = _text(manifest.git_revision)
    # A dirty work tree means the revision alone does not reproduce the run; say so.
    return f"{revision} (uncommitted changes)" if manifest.git_dirty else revision


def _build(manifest: Manifest) -> str:
    parts = [
        f"archlab-engine {manifest.engine_version}" if manifest.engine_version else "",
        f"{manifest.build_profile} build" if manifest.build_profile else "",
    ]
    return " · ".join(p for p in parts if p) or MISSING


def _placement(manifest: Manifest) -> str:
    if manifest.server_cpus is None and manifest.client_cpus is None:
        return MISSING
    return f"server on CPU {_text(manifest.server_cpus)} · load generator on CPU {_text(manifest.client_cpus)}"


def _network(manifest: Manifest) -> str:
    """Loopback, or the emulated link of the spec's ``[network]`` (a list: the levels of a
    factor); what each cell's link applied is in the manifest and each repetition's link.json."""
    given = manifest.spec.get("network")
    if given is None:
        return "loopback"
    parts = [f"{k}={'|'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in given.items()]
    return "emulated link (archlab-engine link): " + (" ".join(parts) or "defaults (MTU 1500)")


def provenance(manifest: Manifest) -> Provenance:
    return Provenance(
        name=manifest.name,
        description=manifest.description,
        run_id=_text(manifest.run_id),
        status=manifest.status,
        started=_when(manifest.started_at),
        protocol=_protocol(manifest),
        git_revision=_git_revision(manifest),
        build=_build(manifest),
        kernel=_text(manifest.kernel),
        cpu_model=_text(manifest.cpu_model),
        placement=_placement(manifest),
        spec_hash=_text(manifest.spec_hash),
        load_model=_text(manifest.load_model),
        network=_network(manifest),
    )
