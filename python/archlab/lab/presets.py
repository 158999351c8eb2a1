"""Peers the lab configures itself (a ``[[systems]]`` entry with ``preset = "NAME"``): for each,
where its program is, the configuration it gets in the system's scratch directory (filled with
the port, address and directory of the start) and the command that runs it in the foreground.
Readiness and the stop signal are the preset's defaults in :mod:`archlab.spec.systems`. A peer
that is not installed is a failure of the cell that says how to install it."""

from __future__ import annotations

import shutil
from pathlib import Path

from archlab.errors import ProcessFailed

# The answer to /echo: 1 KiB, the size of the quick start's /echo?size=1024.
ECHO_BYTES = 1024


def _program(name: str, install: str) -> str:
    found = shutil.which(name) or next((str(p) for p in (Path("/usr/sbin") / name, Path("/usr/local/sbin") / name) if p.is_file()), None)
    if found is None:
        raise ProcessFailed(f"preset {name}", f"{name} is not installed; install it with `{install}` (or `scripts/bootstrap bench`)")
    return found


def _nginx(values: dict[str, str], scratch: Path) -> list[str]:
    """One worker in the foreground (master kept, so SIGQUIT is its graceful stop), no access log,
    keep-alive without a request limit, temporary files in the scratch directory; ``/echo``
    answers 1 KiB from memory and every other path ``ok``."""
    program = _program("nginx", "apt-get install nginx-light")
    d = scratch
    body = "x" * ECHO_BYTES
    listen = f"[{values['host']}]:{values['port']}" if ":" in values["host"] else f"{values['host']}:{values['port']}"
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
    default_type text/plain;
    server {{
        listen {listen};
        location = /echo {{ return 200 "{body}"; }}
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""
    (d / "nginx.conf").write_text(config)
    return [program, "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")]


_PRESETS = {"nginx": _nginx}


def command(preset: str, values: dict[str, str], scratch: Path) -> list[str]:
    """Write the preset's configuration into ``scratch`` and return its command line."""
    return _PRESETS[preset](values, scratch)
