"""Cells over an emulated link (``[network]``, :mod:`archlab.lab.network`), on real network
namespaces, TUN devices and the real engine: a configured delay shows in the measured latency as
two one-way delays and no more than the link's tolerance above the same path without delay; the
manifest and each repetition's ``link.json`` say which link a cell ran over and what it applied;
an interrupted or terminated run leaves no namespace, TUN device or process, and a forwarder
killed mid-cell fails that cell (naming the link) without stopping the run; bad values are
refused naming their TOML key; a run without CAP_NET_ADMIN is refused before anything exists.
Short windows (0.2 s warm-up, 1 s measurement) keep the file quick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_env, engine_processes, processes_with_token, spec_text, start_cli

from archlab.errors import SpecError
from archlab.lab.network import NETNS_DIR
from archlab.lab.session import run_spec
from archlab.report.provenance import provenance
from archlab.spec import parse_spec
from archlab.store import Store

EXPERIMENT = 'name = "net"\nrepetitions = 1\nwarmup = "200ms"\nduration = "1s"'
ONE_USER = 'architecture = ["single-thread"]\nworkload = ["/echo?size=16"]\nconcurrency = [1]'
# HDR histograms keep 3 significant digits: a reported quantile is within 0.1 % of a recorded
# value (crates/metrics/src/hdr.rs).
HDR_RELATIVE = 1e-3
# What the link may add to or take from a configured delay: issue 18 asks for the added RTT
# within 5 % of the configured delay (docs/link.md measured +-1 %).
LINK_RELATIVE = 0.05


def _lab_namespaces(pid: int) -> list[str]:
    """The namespaces of the links a run orchestrated by ``pid`` made (``alk-lab<pid>-...``)."""
    return sorted(p.name for p in NETNS_DIR.glob(f"alk-lab{pid}-*")) if NETNS_DIR.is_dir() else []


def _root_tun_devices() -> list[str]:
    return [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("alk-")]


def _wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_delay_shows_as_two_one_way_delays_and_is_recorded(engine_path, tmp_path, token):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=EXPERIMENT, factors=ONE_USER, network='delay = ["0ms", "5ms"]\ncongestion = "reno"'))
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store)
    view = store.load_run(handle.run_id)
    rows = {r.cell_id: r for r in view.rows}
    assert sorted(rows) == ["single-thread__echo-size-16__c1__delay-0ms", "single-thread__echo-size-16__c1__delay-5ms"]
    for r in rows.values():
        assert r.status == "ok", r.error
    base, delayed = rows["single-thread__echo-size-16__c1__delay-0ms"], rows["single-thread__echo-size-16__c1__delay-5ms"]

    # At concurrency 1 every request crosses the link up and its response down, each held
    # 5 ms: no response can come sooner than 10 ms after its request was sent.
    delay_s = 5e-3
    p50_s = delayed.measurement.p50_us * 1e-6
    assert p50_s >= 2 * delay_s * (1 - HDR_RELATIVE), delayed.measurement
    # And no later than the same path without delay plus the two delays, each within the
    # link's tolerance (and the quantiles' HDR rounding): the link adds the delay and nothing else.
    bound_s = (base.measurement.p50_us * 1e-6 + 2 * delay_s * (1 + LINK_RELATIVE)) * (1 + HDR_RELATIVE)
    assert p50_s <= bound_s, (delayed.measurement, base.measurement)

    # The link's own report of the repetition: every packet delivered (but those still held
    # when it stopped), none dropped, each held the delay.
    report = json.loads((delayed.summary_path.parent / "link.json").read_text())
    assert report["exit"] == "exit code 0"
    for direction in ("up", "down"):
        d = report["stats"][direction]
        assert d["packets_in"] == d["packets_out"] + d["held"] and d["packets_out"] > delayed.measurement.requests
        assert d["loss_drops"] == d["queue_drops"] == d["hold_drops"] == d["write_errors"] == 0
        assert 5000 <= d["delay_us"]["p50"] <= 5000 * (1 + LINK_RELATIVE), d["delay_us"]
        assert report["ready"][direction]["delay_us"] == 5000.0
    assert report["ready"]["congestion"] == "reno"
    base_report = json.loads((base.summary_path.parent / "link.json").read_text())
    assert base_report["ready"]["mtu"] == 1500 and base_report["stats"]["up"]["delay_us"]["p50"] < 1000

    # The manifest: the spec's [network] and, per cell, what the data plane applied.
    document = json.loads((handle.directory / "manifest.json").read_text())
    assert document["spec"]["network"] == {"congestion": "reno", "delay": ["0ms", "5ms"]}
    cells = document["network"][-1]["cells"]
    assert cells[delayed.cell_id]["given"] == {"delay": "5ms", "congestion": "reno"}
    assert cells[delayed.cell_id]["applied"]["up"]["delay_us"] == cells[delayed.cell_id]["applied"]["down"]["delay_us"] == 5000.0
    assert cells[base.cell_id]["applied"]["mtu"] == 1500
    assert dict(delayed.cell.factors)["network.delay"] == "5ms"
    # The report's header says the cells ran over the link, and with what.
    assert provenance(view.manifest).network.endswith("congestion=reno delay=0ms|5ms")
    assert not _lab_namespaces(os.getpid()) and not engine_processes(token)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_leaves_no_namespace_device_or_process(engine_path, tmp_path, token, sig):
    spec = tmp_path / "spec.toml"
    long_run = 'name = "net"\nrepetitions = 1\nwarmup = "200ms"\nduration = "30s"'
    spec.write_text(spec_text(experiment=long_run, factors=ONE_USER, network='delay = "1ms"'))
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    try:
        # The link exists, and the load generator runs over it (it is the last process started).
        _wait_for(lambda: any(" load " in f" {cmd} " for _, cmd in engine_processes(token)), 30, "the load generator")
        namespaces = _lab_namespaces(cli.pid)
        assert len(namespaces) == 2 and all(n.endswith(("-client", "-server")) for n in namespaces)
        cli.send_signal(sig)
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode != 0, stderr
    assert _lab_namespaces(cli.pid) == []
    assert _root_tun_devices() == []
    assert processes_with_token(token) == []


def test_a_killed_forwarder_fails_its_cell_and_the_run_goes_on(engine_path, tmp_path, token):
    spec = tmp_path / "spec.toml"
    two = 'architecture = ["single-thread", "blocking"]\nworkload = ["/echo?size=16"]\nconcurrency = [1]'
    spec.write_text(spec_text(experiment='name = "net"\nwarmup = "200ms"\nduration = "3s"', factors=two, network="mtu = 1500"))
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    try:

        def first_cell_loading() -> int | None:
            procs = engine_processes(token)
            if not any(" load " in f" {cmd} " for _, cmd in procs):
                return None
            return next((pid for pid, cmd in procs if " link --name " in cmd), None)

        forwarder = _wait_for(first_cell_loading, 30, "the first cell's load over its link")
        os.kill(forwarder, signal.SIGKILL)
        out, stderr = cli.communicate(timeout=90)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 0, stderr
    store = Store(tmp_path / "runs")
    (run_id,) = [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    rows = {r.cell_id: r for r in store.load_run(run_id).rows}
    first, second = rows["single-thread__echo-size-16__c1"], rows["blocking__echo-size-16__c1"]
    assert first.status == "failed" and first.error.startswith("link: killed by signal 9"), first.error
    assert second.status == "ok", second.error
    # SIGKILL leaves the namespaces to whoever cleans up: here the lab, at once.
    assert _lab_namespaces(cli.pid) == [] and processes_with_token(token) == []


@pytest.mark.parametrize(
    ("network", "field", "allowed"),
    [
        ("loss = 1.5", "network.loss", "a probability in [0, 1]"),
        ('delay = "-5ms"', "network.delay", ""),
        ('rate = "0mbit"', "network.rate", "at least 1bit"),
        ("mtu = 100", "network.mtu", "bytes in 576..=65535"),
        ('delay = ["0ms", "5ms"]\njitter = "1ms"', "network.jitter", "a jitter of at most the delay"),
        ('delay = "1ms"\njitter = ["1ms", "2ms"]', "network.jitter[1]", "a jitter of at most the delay"),
        ('queue_up = "64KiB"', "network.queue_up", "a rate limit on the up direction first"),
        ('delay_sideways = "1ms"', "network.delay_sideways", "a key one of mtu, delay"),
        ("delay = []", "network.delay", "a non-empty list of levels"),
        ('delay = ["5ms", "5ms"]', "network.delay", "levels that differ"),
    ],
)
def test_bad_values_are_refused_naming_the_key(native, network, field, allowed):
    from archlab.spec import DataPlaneRegistry, SpecEnvironment

    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors=ONE_USER, network=network), "t.toml", SpecEnvironment.local(DataPlaneRegistry()))
    assert e.value.field == field, str(e.value)
    assert allowed in e.value.allowed, str(e.value)


def test_services_on_loopback_are_refused_with_a_link(native):
    from archlab.spec import DataPlaneRegistry, SpecEnvironment

    factors = 'architecture = ["single-thread"]\nworkload = ["/echo?size=16", "/db?id=1"]\nconcurrency = [1]'
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors=factors, network="mtu = 1500"), "t.toml", SpecEnvironment.local(DataPlaneRegistry()))
    assert e.value.field == "factors.workload[1]"


def test_a_run_without_cap_net_admin_is_refused_before_anything_exists(engine_path, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(factors=ONE_USER, network="mtu = 1500"))
    store = tmp_path / "runs"
    # Root's capabilities after exec are its bounding set: without CAP_NET_ADMIN there, the
    # orchestrator (and every child it would start) lacks it.
    done = subprocess.run(
        ["setpriv", "--bounding-set=-net_admin", "--", sys.executable, "-m", "archlab", "run", str(spec), "--store", str(store)],
        capture_output=True, text=True, env=cli_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "lacks CAP_NET_ADMIN" in lines[0], done.stderr
    assert not store.exists()


def test_a_link_with_load_on_other_hosts_is_refused(engine_path, native):
    from archlab.lab.engine import Engine
    from archlab.lab.network import NetworkUnavailable, prepare
    from archlab.spec import DataPlaneRegistry, SpecEnvironment

    experiment = parse_spec(spec_text(factors=ONE_USER, network="mtu = 1500"), "t.toml", SpecEnvironment.local(DataPlaneRegistry()))
    with pytest.raises(NetworkUnavailable, match="without --cluster"):
        prepare(Engine(engine_path), experiment, remote_load=True)
