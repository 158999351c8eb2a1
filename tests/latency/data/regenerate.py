"""Regenerate the tool-produced fixtures in this folder (run by hand, not by pytest):

* ``wrk_latency.txt``: ``wrk --latency`` (wrk 4.1.0, Debian) for 1 s against a Python
  ``http.server`` on 127.0.0.1, port 0.
* ``jmeter213_default.jtl`` and ``jmeter213_connect.jtl``: real JMeter 2.13 (Debian ``jmeter`` +
  ``jmeter-http``) CSV results against the same server, 2 threads x 100 loops of two samplers
  ("GET /, with comma" -> 200, "GET /missing" -> 404); the second adds IdleTime and Connect.

Usage: ``python tests/latency/data/regenerate.py`` (needs wrk, javac and JMeter installed). Traffic
goes to loopback only. The HdrHistogram and memtier fixtures are built inside the tests.
"""

from __future__ import annotations

import glob
import http.server
import subprocess
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
JMETER_CLASSPATH = ":".join(sorted(glob.glob("/usr/share/jmeter/lib/ext/*.jar") + glob.glob("/usr/share/jmeter/lib/*.jar")
                                   + glob.glob("/usr/share/java/*.jar")))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the console readable
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        wrk = subprocess.run(["wrk", "-t1", "-c4", "-d1s", "--latency", url], check=True, capture_output=True, text=True)
        (HERE / "wrk_latency.txt").write_text(wrk.stdout)
        with tempfile.TemporaryDirectory() as build:
            subprocess.run(["javac", "-d", build, "-cp", JMETER_CLASSPATH, str(HERE / "jmeter" / "Fixture.java")], check=True)
            port = str(server.server_address[1])
            for name, extra in (("jmeter213_default.jtl", []),
                                ("jmeter213_connect.jtl", ["jmeter.save.saveservice.connect_time=true",
                                                           "jmeter.save.saveservice.idle_time=true"])):
                output = HERE / name
                output.unlink(missing_ok=True)
                subprocess.run(["java", "-cp", f"{JMETER_CLASSPATH}:{build}", "Fixture", port, str(output), "100", *extra],
                               check=True, capture_output=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
