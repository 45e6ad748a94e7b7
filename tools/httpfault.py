#!/usr/bin/env python3
"""httpfault.py - a tiny HTTP/1.1 file server that misbehaves on purpose, for
the remote-source tests (tests/remote/servers.sh, docs/REMOTE.md).

    python3 tools/httpfault.py ROOT PORT

Serves ROOT on 127.0.0.1:PORT with Range support and a stable ETag under
/ok/NAME, and these faults (NAME is a file under ROOT):

    /truncate/NAME  announces the full Content-Length, sends half, closes
    /stall/NAME     sends the headers and one byte, then nothing (30 s at most)
    /flaky/NAME     every second request to that path gets 503 (never the
                    same Range twice)
    /etagflip/NAME  the first request gets ETag "v1", every later one "v2"
                    (If-Match ignored, so the client's own ETag check is what
                    catches the change)
    /badrange/NAME  206 with a Content-Range that starts one byte late
    /status/CODE    answers CODE with a small body
    /presign/N/NAME 302 to /signed/N/NAME?sig=K, a fresh K each time: a
                    presigned URL that serves N requests, then answers 403
                    AccessDenied "Request has expired"

Every request is counted; GET /stats returns "path count" lines.
"""
import http.server
import os
import re
import sys
import threading
import time

ROOT = sys.argv[1]
PORT = int(sys.argv[2])
lock = threading.Lock()
counts = {}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_body(self, code, body, extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with lock:
            n = counts.get(self.path, 0) + 1
            counts[self.path] = n
        if self.path == "/stats":
            body = "".join("%s %d\n" % kv for kv in sorted(x for x in counts.items() if isinstance(x[0], str))).encode()
            return self.send_body(200, body)
        m = re.match(r"^/status/(\d+)$", self.path)
        if m:
            code = int(m.group(1))
            return self.send_body(code, b"<Error><Code>Injected</Code><Message>status %d on purpose</Message></Error>" % code)
        m = re.match(r"^/presign/(\d+)/(.+)$", self.path)
        if m:
            with lock:
                sig = counts.get("presign-signatures", 0) + 1
                counts["presign-signatures"] = sig
            loc = "/signed/%s/%s?sig=%d" % (m.group(1), m.group(2), sig)
            return self.send_body(302, b"", [("Location", loc)])
        m = re.match(r"^/signed/(\d+)/([^?]+)\?sig=\d+$", self.path)
        if m and n > int(m.group(1)):
            return self.send_body(403, b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>")
        if m:
            m = re.match(r"^/signed/\d+/([^?]+)", self.path)
            mode, name = "ok", m.group(1)
        else:
            m = re.match(r"^/(ok|truncate|stall|flaky|etagflip|badrange)/(.+)$", self.path)
            if not m:
                return self.send_body(404, b"no such path\n")
            mode, name = m.group(1), m.group(2)
        path = os.path.realpath(os.path.join(ROOT, name))
        if not path.startswith(os.path.realpath(ROOT) + "/") or not os.path.isfile(path):
            return self.send_body(404, b"no such file\n")
        # each distinct Range of a flaky path fails its first time when the
        # path's count is even: retried once, it then succeeds
        key = (self.path, self.headers.get("Range"))
        with lock:
            k = counts.get(key, 0) + 1
            counts[key] = k
        if mode == "flaky" and n % 2 == 0 and k == 1:
            self.send_body(503, b"<Error><Code>SlowDown</Code><Message>flaky on purpose</Message></Error>")
            return
        with open(path, "rb") as f:
            data = f.read()
        size = len(data)
        etag = '"stable-%d"' % size
        if mode == "etagflip":
            etag = '"v1"' if n == 1 else '"v2"'
        rng = self.headers.get("Range")
        start, end = 0, size - 1
        code = 200
        if rng:
            r = re.match(r"bytes=(\d+)-(\d*)$", rng)
            if r:
                start = int(r.group(1))
                end = min(int(r.group(2)) if r.group(2) else size - 1, size - 1)
                if start >= size:
                    return self.send_body(416, b"", [("Content-Range", "bytes */%d" % size)])
                code = 206
        body = data[start:end + 1]
        cr_start = start + 1 if mode == "badrange" else start
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (cr_start, end, size))
        self.end_headers()
        if mode == "truncate" and n > 1:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "stall" and n > 1:
            self.wfile.write(body[:1])
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
            return
        self.wfile.write(body)


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


S(("127.0.0.1", PORT), H).serve_forever()
