#!/usr/bin/env python3
"""delayhdr.py PORT DELAY_MS - the first-byte latency of an object store, for
nginx (tests/remote/servers.sh, bench/remote.sh, docs/REMOTE.md).

nginx proxies every request under /delayed/ here; this server waits DELAY_MS
and answers with only a header, "X-Accel-Redirect: /internal/PATH", so nginx
itself then serves the file (Range, sendfile, limit_rate) from its internal
location. Each request thus costs DELAY_MS before its first byte while the
bytes still flow at nginx's speed (a proxy that copied the bytes would be
the bottleneck)."""
import http.server
import sys
import time

PORT = int(sys.argv[1])
DELAY = float(sys.argv[2]) / 1000.0


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        time.sleep(DELAY)
        path = self.path[len("/delayed"):] if self.path.startswith("/delayed/") else self.path
        self.send_response(200)
        self.send_header("X-Accel-Redirect", "/internal" + path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


S(("127.0.0.1", PORT), H).serve_forever()
