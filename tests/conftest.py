"""Shared test fixtures: the package on ``sys.path`` when it is not installed, a fixed registry
and CPU set for pure spec tests, the ``archlab-engine`` binary for tests that run real processes,
:func:`missing_dependency` (what a test that needs a program does when it is absent: it fails,
naming the Debian package and ``scripts/bootstrap test``, which installs it; no test passes by
skipping what it was meant to check), and helpers to run the CLI in a subprocess and to find
every process a test started, via an environment token children inherit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
PYTHON_SRC = REPO / "python"
if str(PYTHON_SRC) not in sys.path:
    sys.path.insert(0, str(PYTHON_SRC))

from archlab.spec import ArchitectureInfo, FixedRegistry, SpecEnvironment  # noqa: E402

TOKEN_VAR = "ARCHLAB_TEST_TOKEN"

# The Ctrl-C tests model a user pressing Ctrl-C at a terminal, where SIGINT is at its default.
# A suite started in the background by a shell without job control (`nohup make test &` from a
# script, some CI runners) inherits SIGINT ignored, as POSIX asks of such a shell; the pytest
# process would then have no KeyboardInterrupt handler, and every CLI it starts would inherit
# the ignored signal too (ignored signals survive exec) and rightly keep ignoring Ctrl-C. So the
# suite puts SIGINT back at Python's default before any test: the children it starts then get
# it at its default, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The architectures issue 2 registers, with the options each accepts (as the engine reports them).
ARCHITECTURES = (
    ArchitectureInfo("thread-per-connection", "one thread per connection", frozenset({"cpus"})),
    ArchitectureInfo("blocking", "acceptor + fixed pool of P threads", frozenset({"threads", "cpus"})),
    ArchitectureInfo("single-thread", "one epoll reactor thread", frozenset({"cpus"})),
    ArchitectureInfo("netty", "one acceptor + N event loops", frozenset({"loops", "cpus"})),
)


class CheckingRegistry(FixedRegistry):
    """A fixed registry that also rejects workloads the way the data plane does, for three
    known paths; enough to test that validation reports the registry's message."""

    def check_workload(self, target: str) -> None:
        super().check_workload(target)
        path, _, query = target.partition("?")
        if path not in ("/prime", "/sort", "/echo"):
            raise ValueError(f"no workload at {path!r} (known: /prime?n=, /sort?n=, /echo?size=)")
        key = "size" if path == "/echo" else "n"
        name, _, value = query.partition("=")
        if name != key or not value.isdigit():
            raise ValueError(f"parameter {key}: got {query!r}, allowed a non-negative integer")


@pytest.fixture
def registry() -> CheckingRegistry:
    return CheckingRegistry(ARCHITECTURES)


@pytest.fixture
def env(registry) -> SpecEnvironment:
    return SpecEnvironment(registry=registry, cpus=frozenset({0, 1}))


def spec_text(**sections: str) -> str:
    """A small valid spec; keyword arguments replace whole sections (``factors="..."``)."""
    base = {
        "experiment": 'name = "t"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"',
        "factors": 'architecture = ["blocking", "netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [1, 2]',
        "load": 'model = "closed"\nthink_time = "0s"\ntimeout = "2s"',
    }
    base.update(sections)
    return "\n".join(f"[{name}]\n{textwrap.dedent(body).strip()}\n" for name, body in base.items() if body is not None)


# --- real processes ------------------------------------------------------------------------


def missing_dependency(what: str, why: str, install: str) -> NoReturn:
    """Fail the calling test because ``what`` is not available (``why``), saying how to get it:
    ``install`` names the package (``the Debian package `memcached` ``), and ``scripts/bootstrap
    test`` (run by ``make test``) installs every one the tests need."""
    pytest.fail(f"{what} is required but {why}: install {install} with `scripts/bootstrap test`", pytrace=False)


@pytest.fixture(scope="session")
def engine_path() -> Path:
    """The built engine; tests needing it fail if it is absent or broken."""
    from archlab.errors import EngineNotFound
    from archlab.lab.engine import find_engine

    def unavailable(why: str) -> NoReturn:
        missing_dependency("archlab-engine", why, "it (the release build of crates/engine)")

    try:
        path = find_engine()
    except EngineNotFound as e:
        unavailable(str(e))
    for probe in (["architectures", "--json"], ["serve", "--help"], ["load", "--help"]):
        done = subprocess.run([str(path), *probe], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            unavailable(f"`archlab-engine {' '.join(probe)}` failed: {done.stderr.strip()[-300:]}")
    return path


@pytest.fixture(scope="session")
def native():
    """The ``archlab._native`` extension, a required part of the package: a failure if absent."""
    from archlab import contract
    from archlab.errors import NativeMissing

    try:
        return contract.native()
    except NativeMissing as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def token(monkeypatch) -> str:
    """A marker inherited by every process started from now on (in-process or via the CLI)."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_VAR, value)
    return value


def processes_with_token(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live, non-zombie process whose environment has the token."""
    found = []
    needle = f"{TOKEN_VAR}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append((int(entry.name), cmdline))
    return found


def engine_processes(token: str) -> list[tuple[int, str]]:
    # The engine is argv[0], or argv[1] when a script stands in for it through an interpreter.
    return [(pid, cmd) for pid, cmd in processes_with_token(token) if any(Path(w).name == "archlab-engine" for w in cmd.split(" ")[:2])]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_SRC), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def run_cli(*args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archlab", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=cli_env(extra_env),
        timeout=timeout,
    )


def start_cli(*args: str, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "archlab", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd or REPO,
        env=cli_env(),
    )


def wait_no_engine(token: str, timeout_s: float = 5.0) -> list:
    """Engine processes of this test still alive; waits for the condition, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (left := engine_processes(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def alive(pid: int) -> bool:
    """A live, non-zombie process ``pid``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_client_after_its_pid(client: subprocess.Popen, check=lambda pid: True) -> int:
    """SIGKILL a client (so it runs no finally block) once it has printed the pid of what it
    started as its first stdout line and that process runs and passes ``check``; returns that
    pid, for the test to wait on what must stop it."""
    try:
        line = client.stdout.readline()
        assert line.strip().isdigit(), client.stderr.read() if client.poll() is not None else line
        pid = int(line)
        assert alive(pid) and check(pid)
    finally:
        client.kill()
        client.wait()
    return pid


def wait_until_gone(done, timeout_s: float = 30.0) -> None:
    """Wait, on the condition, until ``done()`` holds or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)


def interrupt_when_running(cli: subprocess.Popen, token: str, patterns: list[str], what: str,
                           timeout_s: float = 120.0) -> tuple[int, str]:
    """Ctrl-C an orchestrator once this test's processes match every regular expression of
    ``patterns`` (say, a load generator and the server it loads), waiting on that condition at
    most ``timeout_s``; returns the exit code and everything it wrote to stderr. Fails naming
    ``what`` when they never all run (the orchestrator ended, or the time passed)."""
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            cmds = [cmd for _, cmd in processes_with_token(token)]
            if all(any(re.search(p, c) for c in cmds) for p in patterns):
                break
            if cli.poll() is not None:
                pytest.fail(f"{what} was never seen running; the orchestrator ended: {cli.communicate()[1][-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what} was never seen running within {timeout_s:g} s")
            time.sleep(0.05)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    return cli.returncode, err


def wait_no_process(token: str, timeout_s: float = 30.0) -> list[tuple[int, str]]:
    """This test's processes still alive; waits for there to be none, at most ``timeout_s`` (a
    local cluster's worker processes take a moment to exit)."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_with_token(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def interrupt_mid_cell(cli: subprocess.Popen, token: str, after: str, what: str) -> tuple[int, str]:
    """Ctrl-C an orchestrator in the middle of a cell: read its progress until a line starting
    with ``after``, wait (on the condition, at most 60 s) until the next cell's load generator
    runs, then SIGINT. Returns the exit code and everything it wrote to stderr; ``what`` names
    that next cell in the failure messages."""
    lines: list[str] = []
    try:
        while not any(line.startswith(after) for line in lines):
            line = cli.stderr.readline()
            assert line, f"orchestrator ended before {after!r}: {''.join(lines)}"
            lines.append(line)
        deadline = time.monotonic() + 60
        while not any(" load " in cmd for _, cmd in engine_processes(token)):
            assert time.monotonic() < deadline and cli.poll() is None, f"{what}'s load generator did not start"
            time.sleep(0.02)
        cli.send_signal(signal.SIGINT)
        _, rest = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    return cli.returncode, "".join(lines) + rest
