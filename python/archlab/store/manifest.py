"""The facts a run directory's ``manifest.json`` records so that a result can be traced and
reproduced: the validated spec, its hash and its raw text; the code (git revision and whether the
work tree had uncommitted changes), the engine's version and build profile; the machine (kernel,
CPU model and count, hostname) and where server and client were pinned; the tool versions.
Each fact is gathered defensively: a missing one is recorded as ``null``, never a crash."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import archlab
from archlab.spec.model import Experiment

MANIFEST_SCHEMA = "archlab/run-manifest"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class EngineFacts:
    version: str
    build_profile: str  # release | debug | installed


def build_manifest(run_id: str, experiment: Experiment, spec_text: str, started_at: datetime, engine: EngineFacts | None) -> dict:
    return {
        "schema": MANIFEST_SCHEMA,
        "schema_version": MANIFEST_VERSION,
        "run_id": run_id,
        "experiment": experiment.name,
        "started_at": started_at.isoformat() + "Z",
        "git": git_state(Path(archlab.__file__).parent),
        "build_profile": engine.build_profile if engine else None,
        "engine_version": engine.version if engine else None,
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": sorted(os.sched_getaffinity(0)),
        "hostname": socket.gethostname(),
        "placement": {
            "server_cpus": experiment.placement.server_cpu_list,
            "client_cpus": experiment.placement.client_cpu_list,
        },
        "load_model": experiment.load.model,
        "spec": experiment.to_dict(),
        "spec_hash": experiment.spec_hash(),
        "spec_text": spec_text,
        "cells": [c.cell_id for c in experiment.cells()],
        "repetitions": experiment.repetitions,
        "tools": tool_versions(),
    }


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
    versions = {"python": platform.python_version(), "archlab": archlab.__version__}
    for module in ("duckdb", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = None
    return versions
