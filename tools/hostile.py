#!/usr/bin/env python3
"""hostile.py - an HTTP server that attacks its client, for the remote-source
security tests (docs/SAFETY.md "Remote sources";
tests/cli/hostile.test.sh, tests/test_hostile.c, python/tests/test_hostile.py).

    python3 tools/hostile.py ROOT STATEDIR OWNER_PID [CERT KEY]

Listens on 127.0.0.1 (server "A", the first party) and on 127.0.0.2 (server
"B", another host), both on free ports, and with CERT and KEY also with TLS
on 127.0.0.1 (server "T"). Writes "A B T" ports to STATEDIR/ports (T is 0
without a certificate) once all listen. Every request is appended to
STATEDIR/requests.log as one JSON line {"srv", "method", "path", "headers"},
so a test can assert which headers reached which host. Exits when OWNER_PID
is gone, or after 300 s, whichever is first; every loop is bounded.

Files are served from ROOT. Paths (NAME is a file under ROOT):

  /file/NAME                 the file, with Range and a stable ETag
  /redir/NAME                302 to B's /file/NAME (another host)
  /redir-same/NAME           302 to A's /file/NAME (same origin)
  /downgrade/NAME            (on T) 302 to http://127.0.0.1:A/file/NAME
  /dribble/NAME              200/206 headers, then 2 bytes a second
  /failrange/NAME            ranges from 0 are served, every other one 403
  /s3/BUCKET/KEY             S3-style object: GET -> 307 to B's /file/KEY
  /s3/BUCKET/?list-type=2&prefix=P
                             a ListObjectsV2 answer whose keys include
                             ones outside P ("a", "zz/x.bin") besides the
                             files under ROOT/P
  /s3/dotdot/?list-type=2&prefix=P
                             keys P/one.bin and P/../../escaped.bin; every
                             object of bucket dotdot is ROOT/p/one.bin
  Hugging Face layout (HF_ENDPOINT=http://127.0.0.1:A), ORG selects what is
  done wrong; the right sha256 of NAME is sent by A unless said otherwise:
  /ORG/REPO/resolve/REV/NAME 302 to B /hfcdn/ORG/NAME with X-Linked-Etag,
                             X-Linked-Size, X-Repo-Commit (40 hex digits)
      ORG=ok       nothing wrong (a token must still not reach B)
      ORG=commit   X-Repo-Commit: ../../../escaped
      ORG=subst    B serves SUBST_NAME (ROOT/subst/NAME) with its own
                   X-Linked-Etag (its sha256) and X-Repo-Commit
      ORG=b64      B sends an ETag that is 64 hex digits of another file
                   and A sends no X-Linked-Etag
  /api/models/ORG/REPO/revision/REV  {"siblings": [{"rfilename": NAME}...]}
                             (every file directly under ROOT)
"""
import hashlib
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

ROOT = os.path.realpath(sys.argv[1])
STATE = sys.argv[2]
OWNER = int(sys.argv[3])
CERT = sys.argv[4] if len(sys.argv) > 5 else None
KEY = sys.argv[5] if len(sys.argv) > 5 else None
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
ports = {"A": 0, "B": 0, "T": 0}
log_lock = threading.Lock()
deadline = time.monotonic() + 300


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def local(name):
    p = os.path.realpath(os.path.join(ROOT, name))
    if not p.startswith(ROOT + "/") or not os.path.isfile(p):
        return None
    return p


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    srv = "?"

    def log_message(self, *a):
        pass

    def record(self):
        line = json.dumps({"srv": self.srv, "method": self.command, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()}})
        with log_lock:
            with open(os.path.join(STATE, "requests.log"), "a") as f:
                f.write(line + "\n")

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def redirect(self, url, headers=()):
        self.reply(302, b"", [("Location", url)] + list(headers))

    def serve_file(self, path, headers=(), dribble=False):
        with open(path, "rb") as f:
            data = f.read()
        size = len(data)
        etag = '"hostile-%d"' % size
        start, end, code = 0, size - 1, 200
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if m and size:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start >= size:
                return self.reply(416, b"", [("Content-Range", "bytes */%d" % size)])
            code = 206
        body = data[start:end + 1]
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        hs = dict((k.lower(), (k, v)) for k, v in headers)
        if "etag" not in hs:
            self.send_header("ETag", etag)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if not dribble:
            self.wfile.write(body)
            return
        # 2 bytes a second, for at most 120 s
        for i in range(0, min(len(body), 240), 2):
            if time.monotonic() > deadline:
                break
            try:
                self.wfile.write(body[i:i + 2])
                self.wfile.flush()
            except OSError:
                return
            time.sleep(1)
        self.close_connection = True

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record()
        u = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(u.path)
        A = "http://127.0.0.1:%d" % ports["A"]
        B = "http://127.0.0.2:%d" % ports["B"]
        m = re.match(r"^/(file|redir|redir-same|downgrade|dribble|failrange)/(.+)$", path)
        if m:
            kind, name = m.groups()
            p = local(name)
            if not p:
                return self.reply(404, b"no such file\n")
            if kind == "file":
                return self.serve_file(p)
            if kind == "redir":
                return self.redirect(B + "/file/" + name)
            if kind == "redir-same":
                return self.redirect(A + "/file/" + name)
            if kind == "downgrade":
                return self.redirect(A + "/file/" + name)
            if kind == "failrange":
                if self.headers.get("Range", "").startswith("bytes=0-"):
                    return self.serve_file(p)
                return self.reply(403, b"<Error><Code>AccessDenied</Code></Error>")
            return self.serve_file(p, dribble=True)
        m = re.match(r"^/s3/([^/]+)/(.*)$", path)
        if m:
            bucket, key = m.groups()
            q = urllib.parse.parse_qs(u.query)
            if key == "" and q.get("list-type") == ["2"]:
                prefix = q.get("prefix", [""])[0]
                if bucket == "dotdot":
                    keys = [prefix + "one.bin", prefix + "../../escaped.bin"]
                    xml = "<?xml version=\"1.0\"?><ListBucketResult><Name>dotdot</Name><Prefix>%s</Prefix>" % prefix
                    xml += "".join("<Contents><Key>%s</Key><Size>1</Size></Contents>" % k for k in keys)
                    xml += "<IsTruncated>false</IsTruncated></ListBucketResult>"
                    return self.reply(200, xml.encode(), [("Content-Type", "application/xml")])
                keys = ["a", "zz/x.bin"]
                d = os.path.join(ROOT, prefix)
                if os.path.isdir(d):
                    keys += sorted(prefix + n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))
                keys.append("b")  # the last one too: a short key at the end of the listing
                xml = "<?xml version=\"1.0\"?><ListBucketResult><Name>%s</Name><Prefix>%s</Prefix>" % (bucket, prefix)
                xml += "".join("<Contents><Key>%s</Key><Size>1</Size></Contents>" % k for k in keys)
                xml += "<IsTruncated>false</IsTruncated></ListBucketResult>"
                return self.reply(200, xml.encode(), [("Content-Type", "application/xml")])
            p = local("p/one.bin" if bucket == "dotdot" else key)
            if not p:
                return self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
            if bucket == "dotdot":
                key = "p/one.bin"
            self.send_response(307)
            self.send_header("Location", B + "/file/" + key)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.match(r"^/api/models/([^/]+)/([^/]+)/revision/(.+)$", path)
        if m:
            names = sorted(n for n in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, n)))
            body = json.dumps({"sha": COMMIT, "siblings": [{"rfilename": n} for n in names]}).encode()
            return self.reply(200, body, [("Content-Type", "application/json")])
        # matched before unquoting: a revision holds %2F as the Hub's do
        m = re.match(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$", u.path)
        if m:
            org, repo, rev, name = (urllib.parse.unquote(g) for g in m.groups())
            p = local(name)
            if not p:
                return self.reply(404, b"Entry not found")
            size = os.path.getsize(p)
            commit = "../../../escaped" if org == "commit" else COMMIT
            hs = [("X-Linked-Size", str(size)), ("X-Repo-Commit", commit), ("ETag", '"%s"' % sha256(p))]
            if org != "b64":
                hs.append(("X-Linked-Etag", '"%s"' % sha256(p)))
            return self.redirect(B + "/hfcdn/%s/%s" % (org, name), hs)
        m = re.match(r"^/hfcdn/([^/]+)/(.+)$", path)
        if m:
            org, name = m.groups()
            p = local(name)
            if not p:
                return self.reply(404, b"no such file\n")
            if org == "subst":
                s = local("subst/" + name)
                if s:
                    return self.serve_file(s, [("X-Linked-Etag", '"%s"' % sha256(s)),
                                               ("X-Repo-Commit", OTHER_COMMIT), ("ETag", '"%s"' % sha256(s))])
            if org == "b64":
                other = "%064x" % 0xdeadbeef
                return self.serve_file(p, [("ETag", '"%s"' % other)])
            return self.serve_file(p)
        return self.reply(404, b"no such path\n")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make(addr, srv, tls=False):
    cls = type("H" + srv, (H,), {"srv": srv})
    s = Server((addr, 0), cls)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT, KEY)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    ports[srv] = s.server_address[1]
    threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    return s


def main():
    make("127.0.0.1", "A")
    make("127.0.0.2", "B")
    if CERT:
        make("127.0.0.1", "T", tls=True)
    tmp = os.path.join(STATE, "ports.tmp")
    with open(tmp, "w") as f:
        f.write("%d %d %d\n" % (ports["A"], ports["B"], ports["T"]))
    os.rename(tmp, os.path.join(STATE, "ports"))
    while time.monotonic() < deadline:
        try:
            os.kill(OWNER, 0)
        except OSError:
            break
        time.sleep(0.2)
    os._exit(0)


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
