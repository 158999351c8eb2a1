"""archlab.contract: the data plane's option contracts as the control plane sees them, through
archlab._native. The schema is the engine's own (every option it documents in `serve --help`),
a checked set comes back normalised, a refusal is typed (option, allowed values, value, hint),
and a missing or outdated extension is one clear error."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import archlab
from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import NativeMissing


def test_the_server_schema_is_what_the_engine_documents(engine_path):
    help_text = subprocess.run([str(engine_path), "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    options = contract.server_options()
    assert len(options) >= 20
    for o in options:
        assert f"{o.flag} " in help_text or help_text.rstrip().endswith(o.flag) or f"{o.flag}\n" in help_text, o.flag
        assert o.doc and o.allowed, o
    ring = contract.server_option("ring_size")
    assert (ring.flag, ring.allowed, ring.default) == ("--ring-size", "a power of two in 2..=16777216", None)
    assert contract.server_option("db_pool").default == 10  # HikariCP's default, the server's


def test_check_server_normalises_and_refuses_with_a_typed_error():
    assert contract.check_server("netty", {"loops": 2, "wait": None}) == {
        "loops": 2, "db_pool": 10, "db_wait_ms": 1000, "max_body_bytes": 1024 * 1024, "nodelay": True,
        # The limits of a long run (nginx's client_header_timeout and keepalive_timeout).
        "request_timeout_ms": 60_000, "idle_timeout_ms": 75_000, "max_connections": 0, "max_output_bytes": 1024 * 1024,
    }  # fmt: skip
    with pytest.raises(OptionRefused) as e:
        contract.check_server("blocking", {"loops": 2})
    assert (e.value.parameter, e.value.received) == ("loops", "2")
    assert e.value.allowed == "no loops value for architecture 'blocking', which accepts options: threads, pool_control, pool_min, pool_interval_ms, sndbuf, rcvbuf"
    assert e.value.hint == "loops applies to netty, hybrid, reactor-pool, netty-ring, io-uring"
    with pytest.raises(OptionRefused) as e:
        contract.check_server("seda-ring", {"ring_size": 1000})
    assert str(e.value) == "ring_size: expected a power of two in 2..=16777216, got '1000'"
    with pytest.raises(OptionRefused) as e:
        contract.check_server("blockin", {})
    assert e.value.parameter == "architecture" and e.value.allowed.startswith("one of thread-per-connection, sync, blocking")
    # The extension's own exception carries the same four parts, for callers that use it directly.
    with pytest.raises(contract.native().OptionError) as raw:
        contract.native().check_server("netty", '{"wait": "spin"}')
    assert isinstance(raw.value, ValueError)
    assert (raw.value.field, raw.value.allowed, raw.value.received) == ("wait", "one of blocking, yielding, busy-spin", '"spin"')


def test_check_proxy_takes_both_sets_and_refuses_what_cannot_proxy(engine_path):
    help_text = subprocess.run([str(engine_path), "proxy", "--help"], capture_output=True, text=True, timeout=30).stdout
    for o in contract.proxy_options():
        assert o.flag in help_text and o.doc and o.allowed, o
    checked = contract.check_proxy("netty", {"backends": "127.0.0.1:8081*2", "policy": "p2c", "loops": 2})
    assert (checked["backends"], checked["policy"], checked["loops"]) == ("127.0.0.1:8081*2", "p2c", 2)
    assert checked["eject_after"] == contract.proxy_options()[[o.name for o in contract.proxy_options()].index("eject_after")].default
    with pytest.raises(OptionRefused) as e:
        contract.check_proxy("tokio", {"backends": "127.0.0.1:8081"})
    assert e.value.parameter == "arch" and "netty" in e.value.allowed and "tokio" not in e.value.allowed
    with pytest.raises(OptionRefused) as e:
        contract.check_proxy("netty", {})
    assert (e.value.parameter, e.value.received) == ("backends", "none")
    with pytest.raises(OptionRefused) as e:
        contract.check_proxy("netty", {"backends": "127.0.0.1:1", "policy": "fastest"})
    assert e.value.parameter == "policy" and e.value.allowed.startswith("one of round-robin")
    assert {a["name"]: a["proxy"] for a in contract.native().architectures()}["single-thread"] == "same poller"


def test_a_missing_or_outdated_extension_is_one_clear_error(monkeypatch):
    monkeypatch.delattr(archlab, "_native", raising=False)
    monkeypatch.setitem(sys.modules, "archlab._native", None)  # as if it were not built
    with pytest.raises(NativeMissing, match=r"^archlab._native, the package's data-plane extension, is not built .*run `make build`"):
        contract.native()
    old = types.ModuleType("archlab._native")
    old.architectures = lambda: []  # type: ignore[attr-defined]
    old.check_workload = lambda target: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "archlab._native", old)
    with pytest.raises(NativeMissing, match=r"^archlab._native is older than the package \(it lacks check_server, .*\): run `make build`"):
        contract.native()
