"""Which paths are remote URLs: the library decides (pagein_is_url, bound as
_pagein.is_url), and pagein and pagein.fsspec ask it instead of keeping
their own scheme lists; fsspec's protocol aliases (s3a, gcs) map onto
pagein's schemes."""
import os

import pytest

import pagein
from pagein import _pagein

REMOTE = ["http://h/m.safetensors", "https://h/m.safetensors", "s3://b/k", "gs://b/k", "hf://org/name",
          "HTTPS://H/x", "S3://b/k", "Hf://org/name/file.gguf"]
LOCAL = ["", "m.safetensors", "/tmp/m.safetensors", "./s3://b/k", "file:///tmp/m", "s3a://b/k", "gcs://b/k",
         "ftp://h/x", "http:/h/x", "s3:/b", "memory://x", "pagein://s3://b/k"]


@pytest.mark.skipif(not _pagein.remote_available(), reason="pagein built without libcurl: no remote sources")
@pytest.mark.parametrize("url", REMOTE)
def test_remote_urls(url):
    assert _pagein.is_url(url) is True
    assert pagein._is_url(url) is True


@pytest.mark.parametrize("path", LOCAL)
def test_local_paths(path):
    assert _pagein.is_url(path) is False
    assert pagein._is_url(path) is False


def test_not_str():
    for v in (None, 3, b"https://h/x", os.fspath, ["s3://b/k"]):
        assert _pagein.is_url(v) is False


def test_undecodable_path():
    # a local name that is not UTF-8 (surrogateescape) is a path, not an error
    assert _pagein.is_url(os.fsdecode(b"/tmp/\xff.safetensors")) is False


def test_without_curl_nothing_is_remote():
    if _pagein.remote_available():
        pytest.skip("built with libcurl")
    for url in REMOTE:
        assert _pagein.is_url(url) is False


@pytest.mark.parametrize("url,want", [("s3a://b/k", "s3://b/k"), ("gcs://b/k", "gs://b/k"), ("GCS://b/k", "gs://b/k"),
                                      ("s3://b/k", "s3://b/k"), ("https://h/x", "https://h/x"), ("/tmp/x", "/tmp/x"),
                                      ("s3a:/b", "s3a:/b")])
def test_fsspec_aliases(url, want):
    assert pagein._fsspec_url(url) == want


@pytest.mark.skipif(not _pagein.remote_available(), reason="pagein built without libcurl: no remote sources")
def test_fsspec_strip_protocol():
    fss = pytest.importorskip("pagein.fsspec")
    fs = fss.PageinFileSystem
    assert fs._strip_protocol("s3a://b/k") == "s3://b/k"
    assert fs._strip_protocol("gcs://b/k") == "gs://b/k"
    assert fs._strip_protocol("HF://org/name") == "hf://org/name"
    assert fs._strip_protocol("pagein://https://h/x") == "https://h/x"
    assert fs._strip_protocol("file:///tmp/x/") == "/tmp/x"
    assert fs._strip_protocol("memory://x/") == "memory://x"


class _Handle:
    """The parts of an fsspec file that safe_open looks at."""

    def __init__(self, protocol, path, url, data=b"xyz"):
        self.fs = type("FS", (), {"protocol": protocol, "unstrip_protocol": lambda _s, p: url})()
        self.path = path
        self._data = data

    def seek(self, pos):
        pass

    def read(self, n=-1):
        return self._data


@pytest.mark.skipif(not _pagein.remote_available(), reason="pagein built without libcurl: no remote sources")
def test_file_object_target():
    t = pagein._file_object_target
    assert t(_Handle(("s3", "s3a"), "b/k", "s3a://b/k")) == ("url", "s3://b/k")
    assert t(_Handle(("gcs", "gs"), "b/k", "gcs://b/k")) == ("url", "gs://b/k")
    assert t(_Handle("https", "https://h/x", "https://h/x")) == ("url", "https://h/x")
    assert t(_Handle(("memory",), "/x", "memory://x")) == ("bytes", b"xyz")
