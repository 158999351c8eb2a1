"""The package's exception hierarchy: every error archlab raises on purpose derives from
:class:`ArchlabError`, so callers can catch the lab's errors without catching programming bugs.
Each class says with which status the CLI exits on it (:attr:`ArchlabError.exit_status`): 2 for
input the user can fix (:class:`InvalidValue` and its kind: a spec, an option, a file given to a
command), 1 for everything else the lab could not do."""

from typing import Self


class ArchlabError(Exception):
    """Base class of archlab's errors."""

    exit_status = 1


class InvalidValue(ArchlabError):
    """A value outside what it may be. The message names the parameter (or dotted field path),
    the allowed values and the value received, so a caller can fix the input without reading
    the code. The libraries' own refusals (specs, models, latency analysis) derive from it."""

    exit_status = 2

    def __init__(self, parameter: str, allowed: str, received: object, hint: str = ""):
        self.parameter = parameter
        self.allowed = allowed
        self.received = received
        self.hint = hint
        msg = f"{parameter}: expected {allowed}, got {received!r}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)

    def __reduce__(self):
        # Rebuilt from its fields when it crosses a process boundary (a cluster's worker raised it).
        return (type(self), (self.parameter, self.allowed, self.received, self.hint))

    def named(self, parameter: str) -> Self:
        """The same refusal under the name the user wrote (a CLI flag or a file's field instead
        of a library's parameter name)."""
        renamed = type(self)(parameter, self.allowed, self.received, self.hint)
        renamed.__cause__ = self.__cause__
        return renamed


class SpecError(InvalidValue):
    """An experiment spec or a command-line value is invalid (`parameter` is the dotted field
    path, e.g. ``factors.architecture[2]``)."""

    @property
    def field(self) -> str:
        return self.parameter


class EngineNotFound(ArchlabError):
    """The archlab-engine binary is not built or not on PATH."""


class NativeMissing(ArchlabError):
    """The ``archlab._native`` extension is not built, or is older than the Python package."""


class ProcessFailed(ArchlabError):
    """A process started by the lab failed; carries the tail of its stderr."""

    def __init__(self, what: str, detail: str, stderr_tail: str = ""):
        self.what = what
        self.detail = detail
        self.stderr_tail = stderr_tail
        msg = f"{what}: {detail}"
        if stderr_tail:
            msg += "\n--- stderr (tail) ---\n" + stderr_tail.rstrip()
        super().__init__(msg)

    def __reduce__(self):
        # Rebuilt from its fields, not its message: it crosses processes (a cluster worker's failure).
        return (type(self), (self.what, self.detail, self.stderr_tail))


class ResumableFault(ArchlabError):
    """A fault outside the measured system (e.g. a cluster's load host lost mid-cell) that stops
    the run before the pair it hit is recorded: that pair stays pending, so ``archlab run
    --resume`` runs it again instead of keeping a failed row."""


class StoreError(ArchlabError):
    """The result store is missing a run or is inconsistent."""


class Interrupted(KeyboardInterrupt):
    """The orchestrator received SIGINT or SIGTERM.

    Deliberately a :class:`KeyboardInterrupt` (not an :class:`ArchlabError`): code that records a
    failed cell with ``except Exception`` must never swallow a request to stop.
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by signal {signum}")

    @property
    def exit_code(self) -> int:
        """The shell convention: 128 + the signal number (130 for Ctrl-C)."""
        return 128 + self.signum
