#!/usr/bin/env python3
"""delayhdr.py PORT DELAY_MS [ROOT RATE] - an object store's first-byte
latency and per-connection bandwidth, for nginx (tests/remote/servers.sh,
bench/remote.sh, docs/REMOTE.md).

nginx proxies every request under /delayed/ here; this server waits and
answers with only a header, "X-Accel-Redirect: /internal/PATH", so nginx
itself then serves the file (Range, sendfile) from its internal location.
A proxy that copied the bytes would be the bottleneck.

The wait is DELAY_MS. With ROOT (the directory nginx serves) and RATE
(nginx units: 100m = 100 MiB/s), a GET of a bounded range (Range:
bytes=A-B) of L bytes waits L / RATE more and is then served at nginx's
speed from /internal/: it takes DELAY_MS + L / RATE in all, as on a
connection capped at RATE (its bytes arrive at the end of that time instead
of spread over it; totals and request rates are those of the cap). Any
other GET (the whole object, bytes=A-) is a stream: its headers come after
DELAY_MS and nginx's limit_rate caps it from /internal-limited/.

Why not limit_rate for everything: nginx lets each request send about its
first second's worth (RATE bytes) at once and caps only what follows
(limit = RATE x (seconds since the request began + 1) - sent, in whole
seconds), so a ranged GET of up to RATE bytes would escape the cap. That is
what /limited/ (nginx alone) does: it caps long streams only."""
import http.server
import os
import re
import sys
import time
import urllib.parse

PORT = int(sys.argv[1])
DELAY = float(sys.argv[2]) / 1000.0
ROOT = sys.argv[3] if len(sys.argv) > 3 else None


def parse_rate(s):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", s or "")
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


RATE = parse_rate(sys.argv[4]) if len(sys.argv) > 4 else 0


def body_len(path, rng):
    """Bytes nginx will send for GET path with Range rng (None: unknown)."""
    try:
        size = os.stat(os.path.join(ROOT, urllib.parse.unquote(path).lstrip("/"))).st_size
    except OSError:
        return None
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", (rng or "").strip())
    if not m or (not m.group(1) and not m.group(2)):
        return size
    if not m.group(1):  # suffix: the last N bytes
        return min(int(m.group(2)), size)
    a = int(m.group(1))
    b = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    return max(0, b - a + 1) if a < size else 0


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, head):
        path = self.path[len("/delayed"):] if self.path.startswith("/delayed/") else self.path
        wait, where = DELAY, "/internal-limited"
        rng = self.headers.get("Range")
        if ROOT and RATE and not head and rng and re.fullmatch(r"\s*bytes=\d+-\d+\s*", rng):
            n = body_len(path.split("?", 1)[0], rng)
            if n is not None:
                wait += n / RATE
                where = "/internal"
        time.sleep(wait)
        self.send_response(200)
        self.send_header("X-Accel-Redirect", where + path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.answer(False)

    def do_HEAD(self):
        self.answer(True)


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


S(("127.0.0.1", PORT), H).serve_forever()
