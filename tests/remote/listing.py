#!/usr/bin/env python3
"""listing.py - an S3 ListObjectsV2 endpoint over N generated keys, for the
test that listing a large prefix is linear (tests/cli/pull_reliability.test.sh).

    python3 tests/remote/listing.py PORT

GET /BUCKET/?list-type=2&prefix=P[&continuation-token=T] answers pages of
1000 keys P + "k%07d" for the N of the prefix "nN/" (n80000/ lists 80,000
keys); every other GET (an object) answers 404, so a pull stops at its
first object, right after the listing.
"""
import http.server
import re
import sys
import urllib.parse

PORT = int(sys.argv[1])
PAGE = 1000


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_body(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/xml")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        prefix = q.get("prefix", [""])[0]
        m = re.match(r"^n(\d+)/$", prefix)
        if q.get("list-type") != ["2"] or not m:
            return self.send_body(404, b"<Error><Code>NoSuchKey</Code><Message>not here</Message></Error>")
        n = int(m.group(1))
        start = int(q.get("continuation-token", ["0"])[0])
        end = min(n, start + PAGE)
        keys = "".join("<Contents><Key>%sk%07d</Key><Size>1</Size></Contents>" % (prefix, i) for i in range(start, end))
        more = end < n
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name><Prefix>%s</Prefix>'
                "<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>%s%s</ListBucketResult>" % (
                    prefix, end - start, PAGE, "true" if more else "false", keys,
                    "<NextContinuationToken>%d</NextContinuationToken>" % end if more else ""))
        self.send_body(200, body.encode())


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


S(("127.0.0.1", PORT), H).serve_forever()
