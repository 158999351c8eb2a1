"""Peers the lab configures itself (a ``[[systems]]`` entry with ``preset = "NAME"``): for each,
where its program is, the configuration it gets in the system's scratch directory (filled with
the port, address and directory of the start) and the command that runs it in the foreground.
Readiness and the stop signal are the preset's defaults in :mod:`archlab.spec.systems`. The
balancers of a topology (:mod:`archlab.spec.topology`: HAProxy, nginx, twemproxy) also get the
backends' addresses, and their configurations are the strongest a competent user writes for the
job (keep-alive both ways, connection reuse, one process or thread, as in ``bench/proxy_peers.py``).
A peer that is not installed is a failure of the cell that says how to install it."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path
from typing import Sequence

from archlab.errors import ProcessFailed
from archlab.lab.processes import RunAs

# The answer to /echo: 1 KiB, the size of the quick start's /echo?size=1024.
ECHO_BYTES = 1024


def _program(name: str, install: str) -> str:
    found = shutil.which(name) or next((str(p) for p in (Path("/usr/sbin") / name, Path("/usr/local/sbin") / name) if p.is_file()), None)
    if found is None:
        raise ProcessFailed(f"preset {name}", f"{name} is not installed; install it with `{install}` (or `scripts/bootstrap bench`)")
    return found


def _nginx_run(scratch: Path, server_blocks: str) -> list[str]:
    """Write nginx's configuration into ``scratch`` (one worker in the foreground, master kept so
    SIGQUIT is its graceful stop, no access log, keep-alive without a request limit, temporary
    files in the scratch directory) around ``server_blocks`` (the ``http`` block's own part) and
    return the command that runs it."""
    program = _program("nginx", "apt-get install nginx-light")
    d = scratch
    config = f"""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
{server_blocks}}}
"""
    (d / "nginx.conf").write_text(config)
    return [program, "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")]


def _nginx(values: dict[str, str], scratch: Path) -> list[str]:
    """nginx answering by itself: ``/echo`` answers 1 KiB from memory and every other path
    ``ok``."""
    body = "x" * ECHO_BYTES
    return _nginx_run(scratch, f"""    default_type text/plain;
    server {{
        listen {_listen(values)};
        location = /echo {{ return 200 "{body}"; }}
        location / {{ return 200 "ok\\n"; }}
    }}
""")


def _listen(values: dict[str, str]) -> str:
    return f"[{values['host']}]:{values['port']}" if ":" in values["host"] else f"{values['host']}:{values['port']}"


def _memcached(values: dict[str, str], scratch: Path) -> list[str]:
    """One worker thread (the seed's servers were pinned to one core each), 64 MiB, no UDP. As
    root the lab starts it as ``nobody`` (:func:`run_as`) rather than with ``-u``: a process that
    changes its own user loses its parent-death signal and would outlive a killed lab."""
    program = _program("memcached", "apt-get install memcached")
    return [program, "-l", values["host"], "-p", values["port"], "-U", "0", "-t", "1", "-m", "64", "-c", "4096"]


def run_as(preset: str) -> RunAs | None:
    """The user a preset runs as: ``nobody`` for memcached when the lab is root (it refuses to
    run as root), else the lab's own."""
    if preset != "memcached" or os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("nobody")
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _haproxy_balancer(values: dict[str, str], scratch: Path, backends: Sequence[str]) -> list[str]:
    """HAProxy as a round-robin HTTP balancer: one thread, keep-alive both ways with
    ``http-reuse always``, X-Forwarded-For, no logging; ``-db`` keeps it in the foreground."""
    program = _program("haproxy", "apt-get install haproxy")
    servers = "\n".join(f"    server b{i} {b} maxconn 1024" for i, b in enumerate(backends))
    config = f"""global
    nbthread 1
    maxconn 8192
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    option http-keep-alive
    option forwardfor
    http-reuse always
frontend front
    bind {_listen(values)}
    default_backend servers
backend servers
    balance roundrobin
{servers}
"""
    (scratch / "haproxy.cfg").write_text(config)
    return [program, "-db", "-f", str(scratch / "haproxy.cfg")]


def _nginx_balancer(values: dict[str, str], scratch: Path, backends: Sequence[str]) -> list[str]:
    """nginx as a round-robin balancer: one worker, ``upstream`` with ``keepalive 64``, HTTP/1.1
    to the backends with the Connection header cleared (nginx's documentation of upstream
    keep-alive), X-Forwarded-For."""
    servers = "\n".join(f"        server {b};" for b in backends)
    return _nginx_run(scratch, f"""    upstream backends {{
{servers}
        keepalive 64;
    }}
    server {{
        listen {_listen(values)};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
""")


def _nutcracker(values: dict[str, str], scratch: Path, backends: Sequence[str]) -> list[str]:
    """twemproxy as the memcached proxy of seed 002's comparison: one pool over the servers,
    keys distributed by ketama, server connections kept (``server_connections: 1``, its
    pipelining design), servers never ejected during a run."""
    program = _program("nutcracker", "apt-get install nutcracker")
    servers = "\n".join(f"    - {b}:1" for b in backends)
    config = f"""pool:
  listen: {_listen(values)}
  hash: fnv1a_64
  distribution: ketama
  timeout: 1000
  backlog: 1024
  preconnect: true
  auto_eject_hosts: false
  server_connections: 1
  servers:
{servers}
"""
    (scratch / "nutcracker.yml").write_text(config)
    # Its statistics port cannot be left to the kernel (0 is refused): the lab gives it a free one.
    stats = ["-a", "127.0.0.1", "-s", values["stats_port"]]
    return [program, "-c", str(scratch / "nutcracker.yml"), *stats, "-o", str(scratch / "nutcracker.log"), "-p", str(scratch / "nutcracker.pid")]


_PRESETS = {"nginx": _nginx, "memcached": _memcached}
_BALANCERS = {"haproxy": _haproxy_balancer, "nginx": _nginx_balancer, "nutcracker": _nutcracker}


def command(preset: str, values: dict[str, str], scratch: Path) -> list[str]:
    """Write the preset's configuration into ``scratch`` and return its command line."""
    return _PRESETS[preset](values, scratch)


def balancer_command(preset: str, values: dict[str, str], scratch: Path, backends: Sequence[str]) -> list[str]:
    """The same for a peer in front of ``backends`` (HOST:PORT each)."""
    return _BALANCERS[preset](values, scratch, backends)
