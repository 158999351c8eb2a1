"""Processes the lab starts, and the guarantee that none outlives the orchestrator. A
:class:`ProcessGroup` starts each child in its own session (so a terminal's Ctrl-C reaches only
the orchestrator, which then stops children in order), tracks it, and stops it with SIGTERM to
its whole process group, then SIGKILL after a grace period. While the group is open it turns
SIGINT and SIGTERM into :class:`~archlab.errors.Interrupted`, so ``finally`` blocks run; its
:meth:`ProcessGroup.critical` sections (stopping children, committing a catalog row) defer the
signal until they finish. Children also get ``PR_SET_PDEATHSIG`` = SIGKILL, which covers the one
case no Python code can handle: the orchestrator itself being killed with SIGKILL. A child can
run as another user (:class:`RunAs`: PostgreSQL refuses to run as root); the death signal is
set after the user switch, which would otherwise clear it."""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from archlab.errors import Interrupted, ProcessFailed

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _die_with_parent(parent_pid: int, cpus: Sequence[int] | None = None) -> Callable[[], None] | None:
    """A preexec function asking the kernel to SIGKILL the child when the orchestrator dies,
    and pinning it to ``cpus`` before it runs a single instruction of its own (every thread and
    child it makes inherits the set). libc is resolved before fork, so the child only makes one
    or two system calls before exec."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: sessions and finally blocks still apply
        return None
    cpu_set = set(cpus) if cpus else None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)
        if cpu_set is not None:
            os.sched_setaffinity(0, cpu_set)

    return preexec


# subprocess switches user and groups before it calls preexec_fn, so the death signal that
# preexec_fn sets survives (the kernel clears it when the effective ids change).
die_with_parent = _die_with_parent


@dataclass(frozen=True)
class RunAs:
    """An unprivileged user a child runs as (its supplementary groups dropped)."""

    name: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict:
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


class ManagedProcess:
    """One child: its stdout read line by line on a thread, its stderr written to a file."""

    def __init__(self, name: str, popen: subprocess.Popen, stderr_path: Path):
        self.name = name
        self.popen = popen
        self.stderr_path = stderr_path
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_stdout, name=f"stdout:{name}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def _read_stdout(self) -> None:
        try:
            if self.popen.stdout is None:  # stdout goes to the stderr file (started with merge_stdout)
                return
            for line in self.popen.stdout:
                self._lines.put(line.rstrip("\r\n"))
        except (OSError, ValueError):  # pipe closed under us while stopping
            pass
        finally:
            self._lines.put(None)

    def read_line(self, timeout_s: float) -> str | None:
        """The next stdout line; ``None`` once stdout is closed (normally: the process exited).
        Raises ``TimeoutError`` if nothing arrives within ``timeout_s``."""
        try:
            line = self._lines.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            raise TimeoutError(f"{self.name} printed nothing within {timeout_s:g} s") from None
        if line is None:
            self._lines.put(None)  # stay at EOF for later readers
        return line

    def expect(self, prefix: str, timeout_s: float) -> str:
        """Skip stdout lines until one starts with ``prefix``; fail if the process exits or stays
        silent for ``timeout_s``."""
        try:
            while (line := self.read_line(timeout_s)) is not None:
                if line.startswith(prefix):
                    return line
        except TimeoutError:
            raise self.failure(f"did not print {prefix.strip()!r} within {timeout_s:g} s") from None
        code = self.wait_exit(2.0)
        raise self.failure(f"{describe_exit(code)} before printing {prefix.strip()!r}")

    def wait_exit(self, timeout_s: float) -> int | None:
        try:
            return self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def finish_reading(self) -> None:
        """After exit: let the reader drain stdout (EOF comes once the whole group is gone)."""
        self._reader.join(timeout=1.0)
        if not self._reader.is_alive() and self.popen.stdout is not None:
            self.popen.stdout.close()

    def stderr_tail(self, max_lines: int = 20, max_bytes: int = 4096) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - max_bytes))
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(data.splitlines()[-max_lines:])

    def failure(self, detail: str) -> ProcessFailed:
        return ProcessFailed(self.name, detail, self.stderr_tail())


class ProcessGroup:
    """Every child the lab starts, and the signal handling that guarantees they are stopped."""

    def __init__(self, grace_s: float = 3.0):
        self.grace_s = grace_s
        self._procs: list[ManagedProcess] = []
        self._critical_depth = 0
        self._pending: int | None = None
        self._interrupted = False
        self._previous: dict[int, object] = {}

    # --- signals -------------------------------------------------------------------------

    def __enter__(self) -> "ProcessGroup":
        if threading.current_thread() is threading.main_thread():  # handlers only work there
            for s in _STOP_SIGNALS:
                self._previous[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_all()
        finally:
            for s, handler in self._previous.items():
                signal.signal(s, handler)  # type: ignore[arg-type]
            self._previous.clear()

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._interrupted:
            return  # already stopping: let the cleanup finish
        if self._critical_depth:
            self._pending = signum
            return
        self._interrupted = True
        raise Interrupted(signum)

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A section a stop signal must not cut in half; the signal is raised when it ends."""
        self._critical_depth += 1
        try:
            yield
        finally:
            self._critical_depth -= 1
            if self._critical_depth == 0 and self._pending is not None and not self._interrupted:
                signum, self._pending = self._pending, None
                self._interrupted = True
                raise Interrupted(signum)

    # --- processes -----------------------------------------------------------------------

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        return tuple(self._procs)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        stderr_path: Path,
        run_as: RunAs | None = None,
        cwd: Path | None = None,
        *,
        cpus: Sequence[int] | None = None,
        env: Mapping[str, str] | None = None,
        merge_stdout: bool = False,
    ) -> ManagedProcess:
        """Start ``argv`` in its own session. ``cpus`` pins it from its first instruction,
        ``env`` replaces its environment, ``merge_stdout`` sends stdout to the stderr file too
        (a foreign program's output is kept, not read)."""
        with self.critical():  # a child must never exist without being tracked
            with open(stderr_path, "wb") as stderr:
                try:
                    popen = subprocess.Popen(
                        list(argv),
                        stdin=subprocess.DEVNULL,
                        stdout=stderr if merge_stdout else subprocess.PIPE,
                        stderr=stderr,
                        text=True,
                        bufsize=1,
                        start_new_session=True,
                        preexec_fn=_die_with_parent(os.getpid(), cpus),
                        cwd=cwd,
                        env=dict(env) if env is not None else None,
                        **(run_as.popen_kwargs() if run_as is not None else {}),
                    )
                except OSError as e:
                    raise ProcessFailed(name, f"cannot start {argv[0]}: {e}") from None
            proc = ManagedProcess(name, popen, stderr_path)
            self._procs.append(proc)
            return proc

    def stop(self, proc: ManagedProcess) -> int | None:
        """SIGTERM to the child's process group, SIGKILL after the grace period; returns the
        child's exit status as Popen reports it (negative: killed by that signal)."""
        with self.critical():
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                if proc.wait_exit(self.grace_s) is None:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.popen.wait()
            # The leader is gone; anything it left in its group goes too.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.finish_reading()
            if proc in self._procs:
                self._procs.remove(proc)
            return proc.popen.returncode

    def stop_all(self) -> None:
        with self.critical():
            for proc in reversed(self._procs[:]):  # load generators before the servers they drive
                self.stop(proc)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
