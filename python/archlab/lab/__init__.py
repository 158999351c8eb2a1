"""Orchestration of real processes: finding the engine (:mod:`~archlab.lab.engine`), starting
and always stopping children (:mod:`~archlab.lab.processes`), probing them
(:mod:`~archlab.lab.probes`), running every cell of an experiment into the store
(:mod:`~archlab.lab.runner`), and the entry points that combine them (:mod:`~archlab.lab.session`)."""

from archlab.lab.engine import DataPlaneRegistry, Engine, find_engine
from archlab.lab.runner import RunnerConfig, execute
from archlab.lab.session import resume_run, run_spec

__all__ = ["DataPlaneRegistry", "Engine", "RunnerConfig", "execute", "find_engine", "resume_run", "run_spec"]
