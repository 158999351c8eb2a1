"""The no-orphans guarantee, on ordinary processes (no engine needed): stop escalates from
SIGTERM to SIGKILL, takes grandchildren with it, runs on exceptions; SIGINT, SIGTERM and even
SIGKILL of the orchestrator leave nothing behind; a stop signal waits for a critical section."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import cli_env, processes_with_token

from archlab.errors import Interrupted, ProcessFailed
from archlab.lab.processes import ProcessGroup, describe_exit

IGNORES_SIGTERM = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"]


def wait_gone(token: str, timeout_s: float = 5.0) -> list:
    deadline = time.monotonic() + timeout_s
    while (left := processes_with_token(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_stop_terminates(tmp_path, token):
    with ProcessGroup(grace_s=2.0) as group:
        p = group.start("sleeper", ["sleep", "60"], tmp_path / "err")
        assert group.stop(p) == -signal.SIGTERM
        assert group.processes == ()
    assert wait_gone(token) == []


def test_stop_escalates_to_sigkill(tmp_path, token):
    with ProcessGroup(grace_s=0.3) as group:
        p = group.start("stubborn", IGNORES_SIGTERM, tmp_path / "err")
        assert p.expect("ready", 10) == "ready"
        started = time.monotonic()
        assert group.stop(p) == -signal.SIGKILL
        assert time.monotonic() - started < 5
    assert describe_exit(-9) == "killed by signal 9 (SIGKILL)"


def test_grandchildren_go_too(tmp_path, token):
    script = "sleep 60 & sleep 60 & echo started; wait"
    with ProcessGroup(grace_s=1.0) as group:
        p = group.start("shell", ["bash", "-c", script], tmp_path / "err")
        p.expect("started", 10)
        assert len(processes_with_token(token)) == 3
        group.stop(p)
    assert wait_gone(token) == []


def test_exceptions_still_stop_everything(tmp_path, token):
    with pytest.raises(RuntimeError):
        with ProcessGroup(grace_s=1.0) as group:
            group.start("a", ["sleep", "60"], tmp_path / "a")
            group.start("b", ["sleep", "60"], tmp_path / "b")
            raise RuntimeError("boom")
    assert wait_gone(token) == []


def test_early_exit_reports_stderr_tail(tmp_path):
    with ProcessGroup() as group:
        p = group.start("server", ["bash", "-c", "echo 'error: address already in use' >&2; exit 1"], tmp_path / "err")
        with pytest.raises(ProcessFailed) as e:
            p.expect("listening ", 10)
    msg = str(e.value)
    assert msg.startswith("server: exit code 1 before printing 'listening'")
    assert "--- stderr (tail) ---\nerror: address already in use" in msg


def test_silence_times_out(tmp_path):
    with ProcessGroup(grace_s=0.5) as group:
        p = group.start("server", ["sleep", "60"], tmp_path / "err")
        with pytest.raises(ProcessFailed, match=r"server: did not print 'listening' within 0.2 s"):
            p.expect("listening ", 0.2)


def test_cannot_start(tmp_path):
    with ProcessGroup() as group:
        with pytest.raises(ProcessFailed, match=r"cannot start .*no-such-binary"):
            group.start("x", [str(tmp_path / "no-such-binary")], tmp_path / "err")


def test_signal_waits_for_critical_section(tmp_path):
    finished = []
    with pytest.raises(Interrupted) as e:
        with ProcessGroup() as group:
            with group.critical():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                finished.append(True)
            finished.append("after")  # not reached: the deferred signal is raised here
    assert finished == [True] and e.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


ORCHESTRATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from archlab.errors import Interrupted
    from archlab.lab.processes import ProcessGroup
    out = Path(sys.argv[1])
    try:
        with ProcessGroup(grace_s=0.5) as group:
            for i in range(3):
                group.start(f"child{i}", ["sleep", "60"], out / f"{i}.err")
            stubborn = group.start("stubborn", %r, out / "s.err")
            stubborn.expect("ready", 10)
            print("children started", flush=True)
            time.sleep(60)
    except Interrupted as e:
        sys.exit(e.exit_code)
    """
    % (IGNORES_SIGTERM,)
)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_orchestrator_signal_leaves_no_orphans(tmp_path, token, sig, code):
    orchestrator = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=cli_env())
    try:
        assert orchestrator.stdout.readline().strip() == "children started"
        assert len(processes_with_token(token)) == 5  # orchestrator + 4 children
        orchestrator.send_signal(sig)
        assert orchestrator.wait(timeout=10) == code
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
    # SIGKILL leaves no chance to clean up: the kernel's parent-death signal does it.
    assert wait_gone(token) == []
