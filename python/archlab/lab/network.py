"""Where a cell's client and server meet: loopback, or the emulated link of the spec's
``[network]`` (``archlab-engine link``, ``docs/link.md``). For a cell with a link,
:func:`route_for` starts one forwarder for that (cell, repetition) with the cell's parameters,
waits for its ``ready`` line, and hands the runner a :class:`Route`: the server is started in the
server namespace and the load generator in the client namespace through ``ip netns exec``, which
switches namespace and then execs the program in place, so the pid the lab started is the
server's own (pinning from the first instruction, ``/proc`` probes, SIGUSR1 rusage, the death
signal and process-group teardown all work as on loopback). The lab's own health check connects
from a short-lived thread that has entered the client namespace (a socket belongs to the
namespace of the thread that made it).

One forwarder per pair, not per run: the link's report (packets, drops, achieved delay) is then
exactly the repetition's, and each repetition starts from fresh namespaces, so no TCP state the
kernel caches per destination (ssthresh, RTT in ``tcp_metrics``) carries over from one cell to
the next. Set-up costs tens of milliseconds against seconds of measurement.

Teardown: the forwarder is a child of the :class:`~archlab.lab.processes.ProcessGroup` like any
other, stopped with SIGTERM, on which it removes its namespaces (its TUN devices vanish with its
descriptors, even after SIGKILL); if namespaces are still there afterwards (it was killed), the
lab runs ``link --cleanup``. Forwarding threads are pinned to the CPUs of the side whose packets
they read (up: client CPUs, down: server CPUs), as a NIC's transmit path runs on the sender's
CPU, and scheduled ``realtime`` (the link's default, see ``docs/link.md``)."""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

from archlab import contract
from archlab.errors import ArchlabError, Interrupted, ProcessFailed
from archlab.lab.engine import Engine
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.spec.model import Cell, Experiment, Placement

# How the forwarding threads are scheduled (the link's default; it needs CAP_SYS_NICE).
SCHEDULING = "realtime"
LOOPBACK_HOST = "127.0.0.1"
NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000

T = TypeVar("T")


class NetworkUnavailable(ArchlabError):
    """This process cannot create the emulated link a spec's ``[network]`` asks for."""


def prepare(engine: Engine, experiment: Experiment, remote_load: bool = False) -> None:
    """Before a run with ``[network]`` starts anything: refuse it in one line naming what is
    missing (CAP_NET_ADMIN...) or when its load runs elsewhere (``remote_load``: a cluster's
    hosts are not in this host's namespaces), and remove what killed runs left (links whose
    forwarder is gone; a live link is never touched)."""
    if experiment.network is None:
        return
    if remote_load:
        raise NetworkUnavailable("[network] runs the load generator in this host's client namespace: run it without --cluster")
    missing = contract.link_missing_privilege(SCHEDULING)
    if missing is not None:
        raise NetworkUnavailable(f"[network] runs cells over an emulated link, but {missing}")
    _engine_link(engine, "--cleanup-stale")


def describe(experiment: Experiment) -> dict:
    """The links of the run's cells, for its manifest: what the spec gave and what the data
    plane applies (per direction, defaults filled in), and how the forwarder runs."""
    cells = {}
    for cell in experiment.cells():
        assert cell.network is not None
        cells[cell.cell_id] = {"given": cell.network.params(), "applied": cell.network.applied()}
    return {
        "scheduling": SCHEDULING,
        "cpus_up": experiment.placement.client_cpu_list,
        "cpus_down": experiment.placement.server_cpu_list,
        "cells": cells,
    }


@dataclass(frozen=True)
class Route:
    """How the runner reaches a cell's server: the address the server binds, and how the
    server, the load generator and the lab's own checks are started on their side."""

    host: str = LOOPBACK_HOST
    server_netns: str | None = None
    client_netns: str | None = None

    def server_argv(self, argv: Sequence[str]) -> list[str]:
        return _in_netns(self.server_netns, argv)

    def client_argv(self, argv: Sequence[str]) -> list[str]:
        return _in_netns(self.client_netns, argv)

    def from_client(self, call: Callable[[], T]) -> T:
        """``call()``, with the sockets it makes in the client namespace."""
        return call() if self.client_netns is None else call_in_netns(self.client_netns, call)


LOOPBACK = Route()


def _in_netns(netns: str | None, argv: Sequence[str]) -> list[str]:
    return list(argv) if netns is None else ["ip", "netns", "exec", netns, *argv]


@contextmanager
def route_for(group: ProcessGroup, engine: Engine, cell: Cell, placement: Placement, directory: Path,
              ready_timeout_s: float) -> Iterator[Route]:
    """Loopback for a cell without a link; else a link for the body's duration, its ``ready``
    and final ``stats`` lines kept in ``directory/link.json``."""
    if cell.network is None:
        yield LOOPBACK
        return
    name = f"lab{os.getpid()}-{secrets.token_hex(3)}"  # unique on this host, <= 32 characters
    params = directory / "link.params.json"
    params.write_text(json.dumps(cell.network.params(), indent=2) + "\n")
    argv = [str(engine.path), "link", "--name", name, "--params", str(params),
            "--cpus-up", placement.client_cpu_list, "--cpus-down", placement.server_cpu_list, "--scheduling", SCHEDULING]  # fmt: skip
    link = group.start("link", argv, directory / "link.stderr")
    ready: dict = {}
    try:
        ready = json.loads(link.expect("ready ", ready_timeout_s).split(" ", 1)[1])  # fails with the link's own words
    except BaseException:
        _stop(group, engine, link, name, ready, directory)
        raise
    try:
        yield Route(host=ready["server"]["addr"], server_netns=ready["server"]["netns"], client_netns=ready["client"]["netns"])
        if link.poll() is not None:
            raise link.failure(f"{describe_exit(link.poll())} during the cell")
    except Interrupted:
        raise
    except BaseException as e:
        if link.poll() is not None:
            # A dead forwarder explains a failing server or generator better than they can.
            raise link.failure(f"{describe_exit(link.poll())} during the cell") from e
        raise
    finally:
        _stop(group, engine, link, name, ready, directory)


def _stop(group: ProcessGroup, engine: Engine, link: ManagedProcess, name: str, ready: dict, directory: Path) -> None:
    """Stop the forwarder, keep its report in ``directory/link.json``, remove what it left."""
    exit_status = group.stop(link)
    report = {"ready": ready, "stats": _last_stats(link), "exit": describe_exit(exit_status)}
    (directory / "link.json").write_text(json.dumps(report, indent=2) + "\n")
    _remove_leftovers(engine, name, ready)


def _last_stats(link: ManagedProcess) -> dict | None:
    """The forwarder's last ``stats`` line (it prints one on SIGTERM, before it exits)."""
    last = None
    while True:
        try:
            line = link.read_line(0.0)
        except TimeoutError:
            break
        if line is None:
            break
        if line.startswith("stats "):
            last = json.loads(line.split(" ", 1)[1])
    return last


def _remove_leftovers(engine: Engine, name: str, ready: dict) -> None:
    """Remove the link's namespaces if its forwarder could not (it was killed)."""
    names = [ready.get(side, {}).get("netns") for side in ("client", "server")] or []
    if any(n and (NETNS_DIR / n).exists() for n in names):
        _engine_link(engine, "--cleanup", name)


def _engine_link(engine: Engine, *args: str) -> None:
    try:
        done = subprocess.run([str(engine.path), "link", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ProcessFailed(f"archlab-engine link {' '.join(args)}", str(e)) from None
    if done.returncode != 0:
        raise ProcessFailed(f"archlab-engine link {' '.join(args)}", describe_exit(done.returncode), done.stderr[-2000:])


def call_in_netns(netns: str, call: Callable[[], T]) -> T:
    """Run ``call`` on a new thread that first enters network namespace ``netns``; the thread
    ends with the call, so no other code ever runs in that namespace."""
    outcome: dict[str, object] = {}

    def enter_and_call() -> None:
        try:
            fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc().setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"cannot enter network namespace {netns}: {os.strerror(err)}")
            finally:
                os.close(fd)
            outcome["value"] = call()
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=enter_and_call, name=f"netns:{netns}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
