"""open_model and pull against a hostile server (tools/hostile.py: 127.0.0.1
is the configured host, 127.0.0.2 another host): HF_TOKEN is sent
to the Hub only, never to the host its redirect names, also on the range
requests after the redirect; secrets never appear in exceptions."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import pagein
from conftest import REPO
from conftest import testdata as data_path

pytestmark = pytest.mark.skipif(not pagein._pagein.remote_available(), reason="pagein built without libcurl")


def _have_127_0_0_2():
    try:
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def hostile():
    if not _have_127_0_0_2():
        pytest.skip("127.0.0.2 is not a local address here")
    d = tempfile.mkdtemp(prefix="pagein-pyhostile-")
    www, state = os.path.join(d, "www"), os.path.join(d, "state")
    os.makedirs(www)
    os.makedirs(state)
    shutil.copy(data_path("safetensors", "burn-mnist-f32.safetensors"), os.path.join(www, "model.safetensors"))
    p = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "hostile.py"), www, state, str(os.getpid())])
    try:
        ports = os.path.join(state, "ports")
        deadline = time.monotonic() + 10
        while not os.path.exists(ports) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert os.path.exists(ports), "tools/hostile.py did not start"
        a, b, _ = open(ports).read().split()
        yield d, "http://127.0.0.1:" + a
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d)


def _requests(d, srv):
    path = os.path.join(d, "state", "requests.log")
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path):
        r = json.loads(line)
        if r["srv"] == srv:
            out.append(r)
    return out


def test_open_model_token_stays_with_the_hub(hostile, monkeypatch):
    d, a = hostile
    monkeypatch.setenv("HF_ENDPOINT", a)
    monkeypatch.setenv("HF_TOKEN", "hf_pyS3cr3t")
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    local = os.path.join(d, "www", "model.safetensors")
    n0 = len(_requests(d, "B"))
    for strategy in ("read", "lazy"):
        with pagein.open_model("hf://ok/repo/model.safetensors", strategy=strategy) as m, \
                pagein.open_model(local, strategy="read") as l:
            for n in sorted(l.keys()):
                assert (m.get_tensor(n) == l.get_tensor(n)).all()
    at_a = _requests(d, "A")
    assert any(r["headers"].get("authorization") == "Bearer hf_pyS3cr3t" for r in at_a), "the Hub itself got no token"
    at_b = _requests(d, "B")[n0:]
    assert any("range" in r["headers"] for r in at_b), "no request reached the redirect target"
    for r in at_b:
        h = r["headers"]
        assert "authorization" not in h and not any("s3cr3t" in v.lower() for v in h.values()), \
            "HF_TOKEN reached another host: %r" % (r,)


def test_exception_has_no_secret(hostile, monkeypatch):
    d, a = hostile
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    url = a.replace("http://", "http://user:pyPassw0rd@") + "/missing.safetensors?X-Amz-Signature=pySigValue"
    with pytest.raises(pagein.Error) as e:
        pagein.open_model(url, strategy="read")
    msg = str(e.value)
    assert "pyPassw0rd" not in msg and "pySigValue" not in msg, msg
    assert "X-Amz-Signature=REDACTED" in msg, msg


def test_fsspec_exceptions_have_no_secret(hostile, monkeypatch):
    """pagein.fsspec builds FileNotFoundError around the URL itself: the
    URL's user:pass@ and signature are redacted there too."""
    fsspec = pytest.importorskip("fsspec")
    import pagein.fsspec  # noqa: F401
    d, a = hostile
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    url = a.replace("http://", "http://user:pyPassw0rd@") + "/file/missing.bin?X-Amz-Signature=pySigValue"
    fs = fsspec.filesystem("pagein")
    calls = [lambda: fs.cat_file(url), lambda: fs.info(url), lambda: fs.open(url, "rb"), lambda: fs.ukey(url)]
    for call in calls:
        with pytest.raises(FileNotFoundError) as e:
            call()
        msg = str(e.value)
        assert "pyPassw0rd" not in msg and "pySigValue" not in msg, msg
        assert "X-Amz-Signature=REDACTED" in msg, msg
    got = fs.cat_ranges([url], [0], [4], on_error="return")[0]
    assert isinstance(got, FileNotFoundError)
    assert "pyPassw0rd" not in str(got) and "pySigValue" not in str(got), str(got)


def test_fsspec_get_stays_inside_the_destination(hostile, monkeypatch, tmp_path):
    """An S3 listing naming P/../../escaped.bin: fsspec's get turns names
    into local paths by replacing the listed prefix, so the listing itself
    refuses a '..' component (as pull does) and nothing is written outside
    the destination."""
    fsspec = pytest.importorskip("fsspec")
    import pagein.fsspec  # noqa: F401
    d, a = hostile
    os.makedirs(os.path.join(d, "www", "p"), exist_ok=True)
    with open(os.path.join(d, "www", "p", "one.bin"), "wb") as f:
        f.write(os.urandom(3000))
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    monkeypatch.setenv("AWS_ENDPOINT_URL", a + "/s3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDHOSTILE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3tkey")
    fs = fsspec.filesystem("pagein")
    dest = tmp_path / "a" / "b"
    dest.mkdir(parents=True)
    with pytest.raises(pagein.Error, match=r"unsafe name .*\.\./\.\./escaped\.bin"):
        fs.find("s3://dotdot/p/")
    with pytest.raises(pagein.Error, match="unsafe name"):
        fs.get("s3://dotdot/p/", str(dest) + "/", recursive=True)
    left = sorted(os.path.relpath(os.path.join(r, n), tmp_path) for r, ds, fs_ in os.walk(tmp_path) for n in ds + fs_)
    assert all(x == "a" or x.startswith("a" + os.sep + "b") for x in left), "written outside the destination: %r" % left


def test_fsspec_refuses_storage_options_it_would_ignore(hostile, monkeypatch):
    """s3fs-style storage options (an endpoint, keys, anon) are refused, not
    dropped: dropping client_kwargs={"endpoint_url": ...} sent the read to
    the environment's endpoint with the environment's credentials."""
    fsspec = pytest.importorskip("fsspec")
    import pagein.fsspec as pfs
    d, a = hostile
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    log = os.path.join(d, "state", "requests.log")
    n0 = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    for opts in ({"client_kwargs": {"endpoint_url": "http://127.0.0.2:1"}}, {"key": "AKID", "secret": "s"},
                 {"anon": True}, {"headers": {"Authorization": "Bearer x"}}):
        with pytest.raises(ValueError, match="unsupported storage option"):
            pfs.PageinFileSystem(skip_instance_cache=True, **opts)
        with pytest.raises(ValueError, match="unsupported storage option"):
            fsspec.open("pagein://" + a + "/file/model.safetensors", "rb", **opts).open()
    assert (sum(1 for _ in open(log)) if os.path.exists(log) else 0) == n0, "a request went out"
    # fsspec's own options and the file ones fsspec.open passes along still work
    with fsspec.open("pagein://" + a + "/file/model.safetensors", "rb", block_size=1 << 16,
                     skip_instance_cache=True) as f:
        assert len(f.read(10)) == 10


def test_fsspec_keeps_a_bounded_number_of_sources(hostile, tmp_path):
    """Reading many remote files through one filesystem (which fsspec keeps
    for the life of the process) kept every source with its connections:
    about 5 descriptors a file, 1,500 after 300 files, past `ulimit -n`
    1024. The least recently used ones are dropped; a file still open keeps
    its own source."""
    fsspec = pytest.importorskip("fsspec")
    import pagein.fsspec as pfs
    d, a = hostile
    data = open(os.path.join(d, "www", "model.safetensors"), "rb").read()
    fs = pfs.PageinFileSystem(skip_instance_cache=True)
    fs._MAX_SOURCES = 4
    first = a + "/file/model.safetensors?v=first"
    f = fs.open(first, "rb", block_size=4096)
    assert f.read(100) == data[:100]
    fds0 = len(os.listdir("/proc/self/fd"))
    for i in range(40):
        got = fs.cat_ranges([a + "/file/model.safetensors?v=%d" % i] * 2, [0, 5000], [10, 9000])
        assert got == [data[:10], data[5000:9000]], got
    grown = len(os.listdir("/proc/self/fd")) - fds0
    assert len(fs._srcs) <= 4, len(fs._srcs)
    assert grown <= 4 * 8, "%d descriptors kept after reading 40 files" % grown
    f.seek(200000)
    assert f.read(1000) == data[200000:201000]
    f.close()


def test_fsspec_cat_ranges_opens_a_failing_path_once(hostile, monkeypatch):
    """50 ranges of one missing file: one request, not one open (with its
    retries) per range; every range gets the file's FileNotFoundError."""
    fsspec = pytest.importorskip("fsspec")
    import pagein.fsspec as pfs
    d, a = hostile
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    log = os.path.join(d, "state", "requests.log")
    n0 = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    fs = pfs.PageinFileSystem(skip_instance_cache=True)
    url = a + "/file/missing-many.bin"
    got = fs.cat_ranges([url] * 50, list(range(50)), [x + 1 for x in range(50)])
    assert all(isinstance(g, FileNotFoundError) for g in got), got
    sent = [r for r in map(json.loads, list(open(log))[n0:]) if "missing-many" in r["path"]]
    assert len(sent) == 1, "%d requests for one missing file" % len(sent)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([url] * 3, 0, 1, on_error="raise")
