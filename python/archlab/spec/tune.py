"""The ``[tune]`` section of a spec: a pool-size sweep over service programs (seed 003), read by
``archlab tune SPEC`` (and run like any spec by ``archlab run``).

The section names a program file (checked by the server's own parser through
``archlab._native``), the server option to sweep (``threads``, the worker pool, or ``loops``: the
options a spec can vary as factors), its levels, the level the server runs with untuned
(``default``, for the regret of not tuning) and the objective that defines "best": the mean or
the p99 latency at one closed-model concurrency, or the throughput among the levels whose p99
latency stays under ``p99_limit``. :func:`expand` turns it into the factors every spec has -- one
workload ``/program?name=P`` per program, the parameter's levels -- and the server's
``programs`` option, so the sweep is an ordinary experiment: the lab's runner, repetitions,
intervals, catalog and ``--resume`` apply unchanged. Every refusal names the ``tune.*`` key the
user wrote, before anything runs.

With ``controller`` (e.g. ``"hill-climb"``) the run sweeps nothing: it measures the server's
adaptive pool live (``pool_control``), each program on a pool whose one level in ``levels`` is
the controller's ceiling, at the same concurrency, repetitions and windows as a sweep, so that
the controller's latency per program can be read against a sweep's measured best
(:func:`archlab.tuning.live.controller_regret`)."""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast
from urllib.parse import quote

from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import SpecError

TUNE_KEYS = ("programs", "only", "parameter", "levels", "default", "objective", "concurrency", "p99_limit", "controller")
#: What "best" can mean: the metrics every sweep row measures.
OBJECTIVES = ("mean-latency", "p99-latency", "throughput")
#: Server options a spec can vary as factors, hence sweep.
TUNABLE = ("threads", "loops")
PROGRAM_PATH = "/program"


@dataclass(frozen=True)
class TuneSettings:
    """A validated ``[tune]`` section (see the module docstring)."""

    programs_file: str  # as the spec writes it; relative paths are relative to the working directory
    programs: tuple[str, ...]  # the programs swept, in the file's order
    parameter: str
    levels: tuple[int, ...]
    default: int
    objective: str
    concurrency: int  # the closed-model population the objective is read at
    p99_limit_s: float | None = None
    db_programs: tuple[str, ...] = ()  # programs with a `db` step (they need the lab's PostgreSQL)
    # A live run of the server's adaptive pool (its pool_control), not a sweep; None: a sweep.
    controller: str | None = None

    def workload(self, program: str) -> str:
        return f"{PROGRAM_PATH}?name={quote(program, safe='')}"

    def program_of(self, workload: str) -> str | None:
        """The program a cell's workload runs, or None for another workload."""
        return next((p for p in self.programs if self.workload(p) == workload), None)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> TuneSettings:
        """The inverse of :meth:`to_dict` (a stored run's manifest keeps the section so)."""
        g: Mapping[str, Any] = d
        limit = g.get("p99_limit_s")
        return cls(
            programs_file=str(g["programs_file"]), programs=tuple(g["programs"]), parameter=str(g["parameter"]),
            levels=tuple(int(v) for v in g["levels"]), default=int(g["default"]), objective=str(g["objective"]),
            concurrency=int(g["concurrency"]), p99_limit_s=float(limit) if limit is not None else None,
            controller=str(g["controller"]) if g.get("controller") is not None else None,
        )  # fmt: skip

    def to_dict(self) -> dict:
        d: dict[str, object] = {
            "programs_file": self.programs_file, "programs": list(self.programs), "parameter": self.parameter,
            "levels": list(self.levels), "default": self.default, "objective": self.objective,
            "concurrency": self.concurrency,
        }  # fmt: skip
        if self.p99_limit_s is not None:
            d["p99_limit_s"] = self.p99_limit_s
        if self.controller is not None:  # only when given: sweeps keep their spec hash
            d["controller"] = self.controller
        return d


def os_thread_limit() -> tuple[int, str]:
    """The most threads this machine lets one user start: the smaller of the kernel's
    ``threads-max`` and ``RLIMIT_NPROC`` (soft), with where it comes from."""
    limits: list[tuple[int, str]] = []
    try:
        limits.append((int(Path("/proc/sys/kernel/threads-max").read_text().strip()), "/proc/sys/kernel/threads-max"))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and soft > 0:
        limits.append((int(soft), "ulimit -u"))
    return min(limits) if limits else (1 << 22, "no limit found")


def expand(tune: Mapping[str, object], factors: Mapping[str, object], server: Mapping[str, object],
           load: Mapping[str, object]) -> tuple[TuneSettings, Mapping[str, object], Mapping[str, object]]:
    """Validate ``[tune]`` against the rest of the spec and return it with the ``[factors]`` and
    ``[server]`` tables the sweep runs with."""
    if load.get("model", "closed") != "closed":
        raise SpecError("load.model", "'closed' with a [tune] section (its objectives are read at a concurrency)", load.get("model"))
    programs_file, names, db_programs = _programs(tune)
    parameter = tune.get("parameter", "threads")
    if parameter not in TUNABLE:
        known = {o.name for o in contract.server_options()}
        hint = (f"{parameter} is a server option the spec can only fix ([server]), not vary" if parameter in known
                else "not an option of the data plane's servers")
        raise SpecError("tune.parameter", "one of " + ", ".join(TUNABLE), parameter, hint=hint)
    for key, what in (("workload", "the programs of tune.programs"), (str(parameter), "tune.levels")):
        if key in factors:
            raise SpecError(f"factors.{key}", f"no levels, since [tune] sweeps {what}", factors[key])
    controller = tune.get("controller")
    for key in ("programs", parameter) + (("pool_control",) if controller is not None else ()):
        if key in server:
            raise SpecError(f"server.{key}", "no value, since [tune] sets it", server[key], hint="set it in [tune] instead")
    levels = _levels(tune, str(parameter), factors, one=controller is not None)
    if controller is not None:
        _check_controller(controller, str(parameter), levels[0], factors)
    default = tune.get("default", levels[0] if controller is not None else None)
    if default not in levels:
        raise SpecError("tune.default", f"one of tune.levels ({', '.join(map(str, levels))}): the level the server runs with untuned",
                        default if default is not None else "nothing", hint="regret against it is measured, not extrapolated")
    objective = tune.get("objective", "mean-latency")
    if objective not in OBJECTIVES:
        raise SpecError("tune.objective", "one of " + ", ".join(OBJECTIVES) + " (the metrics a sweep measures)", objective)
    p99_limit_s = None
    if "p99_limit" in tune:
        if objective != "throughput":
            raise SpecError("tune.p99_limit", "no p99_limit unless tune.objective is 'throughput'", tune["p99_limit"])
        from archlab.spec.units import parse_duration

        p99_limit_s = parse_duration(tune["p99_limit"], "tune.p99_limit")
    concurrency = _concurrency(tune, factors)
    settings = TuneSettings(
        programs_file=programs_file, programs=names, parameter=str(parameter), levels=levels, default=int(cast(int, default)),
        objective=str(objective), concurrency=concurrency, p99_limit_s=p99_limit_s, db_programs=db_programs,
        controller=str(controller) if controller is not None else None,
    )  # fmt: skip
    new_factors = {**factors, "workload": [settings.workload(p) for p in names], parameter: list(levels)}
    new_server = {**server, "programs": programs_file}
    if controller is not None:
        new_server["pool_control"] = controller
    return settings, MappingProxyType(new_factors), MappingProxyType(new_server)


def _programs(tune: Mapping[str, object]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    path = tune.get("programs")
    if not isinstance(path, str) or not path:
        raise SpecError("tune.programs", "the path of a program file (TOML, see docs/tuning.md)", path if path is not None else "nothing")
    if not os.path.isfile(path):
        raise SpecError("tune.programs", "the path of an existing program file (relative to the working directory)", path)
    try:
        tree = json.loads(contract.native().load_programs(path))
    except ValueError as e:
        source, field, allowed, received = e.args
        raise SpecError(f"tune.programs ({source}: {field})", allowed, received) from None
    every = [p["name"] for p in tree["programs"]]
    only = tune.get("only", every)
    if not isinstance(only, list) or not only or not all(isinstance(n, str) for n in only):
        raise SpecError("tune.only", "a non-empty list of program names", only)
    for i, name in enumerate(only):
        if name not in every:
            raise SpecError(f"tune.only[{i}]", f"a program of {path} ({', '.join(every)})", name)
    names = tuple(n for n in every if n in set(only))
    if len(names) < 2:
        raise SpecError("tune.only" if "only" in tune else "tune.programs", "at least 2 programs (the learned tuner holds programs out)",
                        list(names))
    db = tuple(p["name"] for p in tree["programs"] if p["name"] in names and _has_db(p["steps"]))
    return path, names, db


def _has_db(steps: list) -> bool:
    return any(s["step"] == "db" or (s["step"] == "repeat" and _has_db(s["steps"])) for s in steps)


def _levels(tune: Mapping[str, object], parameter: str, factors: Mapping[str, object], one: bool = False) -> tuple[int, ...]:
    """``one``: a live controller run, whose single level is the pool's ceiling."""
    levels = tune.get("levels")
    wanted = f"one level of {parameter} with tune.controller (the adaptive pool's ceiling)" if one else f"a list of at least 2 levels of {parameter}"
    if not isinstance(levels, list) or (len(levels) != 1 if one else len(levels) < 2):
        raise SpecError("tune.levels", wanted, levels if levels is not None else "nothing")
    limit, source = os_thread_limit()
    given = factors.get("architecture")
    archs = [a for a in given if isinstance(a, str)] if isinstance(given, list) else []
    takes = {str(a["name"]): set(a.get("options", ())) for a in contract.native().architectures()}
    for i, arch in enumerate(archs):
        if arch in takes and parameter not in takes[arch]:
            pooled = ", ".join(n for n, opts in takes.items() if parameter in opts)
            raise SpecError(f"factors.architecture[{i}]", f"an architecture that takes {parameter} ({pooled})", arch)
    for i, level in enumerate(levels):
        field = f"tune.levels[{i}]"
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise SpecError(field, f"a {parameter} level, an integer >= 1", level)
        if level > limit:
            raise SpecError(field, f"a {parameter} level within the OS thread limit ({limit}, {source})", level)
        for arch in archs:
            try:
                contract.check_server(arch, {parameter: level})
            except OptionRefused as e:
                if e.parameter == parameter:
                    raise SpecError(field, e.allowed, level, hint=e.hint) from None
                raise SpecError("factors.architecture", f"an architecture that takes {parameter}", arch, hint=str(e)) from None
    if len(set(levels)) != len(levels):
        raise SpecError("tune.levels", "levels that differ from each other", levels)
    return tuple(int(v) for v in levels)


def _check_controller(controller: object, parameter: str, ceiling: int, factors: Mapping[str, object]) -> None:
    """``tune.controller`` names a ``pool_control`` of the data plane that every architecture
    of the spec takes (the data plane's own check, so its list of controllers is not copied)."""
    given = factors.get("architecture")
    archs = [a for a in given if isinstance(a, str)] if isinstance(given, list) else []
    for arch in archs:
        try:
            contract.check_server(arch, {parameter: ceiling, "pool_control": controller})
        except OptionRefused as e:
            if e.parameter == "pool_control":
                raise SpecError("tune.controller", e.allowed, controller, hint=e.hint) from None
            raise SpecError("factors.architecture", "an architecture with an adaptive pool (pool_control)", arch,
                            hint=str(e)) from None


def _concurrency(tune: Mapping[str, object], factors: Mapping[str, object]) -> int:
    given = factors.get("concurrency")
    levels = [c for c in given if isinstance(c, int)] if isinstance(given, list) else []
    if "concurrency" not in tune:
        if len(levels) != 1:
            raise SpecError("tune.concurrency", "the concurrency the objective is read at (factors.concurrency has several levels)",
                            "nothing")
        return levels[0]
    c = tune["concurrency"]
    if c not in levels:
        raise SpecError("tune.concurrency", f"one of factors.concurrency ({', '.join(map(str, levels))})", c)
    return int(cast(int, c))
