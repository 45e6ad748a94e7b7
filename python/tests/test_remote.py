"""pagein.pull against real servers on 127.0.0.1 (nginx and s3rver, started
by tests/remote/servers.sh for this module and stopped after it)."""
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest

import pagein
from conftest import REPO
from conftest import testdata as data_path

pytestmark = pytest.mark.skipif(not pagein._pagein.remote_available(), reason="pagein built without libcurl")


@pytest.fixture(scope="module")
def servers():
    d = tempfile.mkdtemp(prefix="pagein-pyremote-")
    os.makedirs(os.path.join(d, "www", "hf", "org", "tiny"))
    os.makedirs(os.path.join(d, "s3"))
    shutil.copy(data_path("safetensors", "burn-mnist-f32.safetensors"), os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors"))
    shutil.copy(data_path("gguf", "llama-2-tiny-random.gguf"), os.path.join(d, "s3", "tiny.gguf"))
    shutil.copy(data_path("safetensors", "ollama-minicpm3-tiny-f32.safetensors"), os.path.join(d, "www", "minicpm3.safetensors"))
    script = os.path.join(REPO, "tests", "remote", "servers.sh")
    r = subprocess.run(["bash", script, "start", d, str(os.getpid()), "nginx", "s3"], capture_output=True, text=True)
    if r.returncode == 77:
        shutil.rmtree(d)
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    env = dict(line.split("=", 1) for line in open(os.path.join(d, "env")).read().split())
    try:
        yield d, env
    finally:
        subprocess.run(["bash", script, "stop", d])
        shutil.rmtree(d)


def settled_lines(log, base):
    """Lines in nginx's access log once every earlier request is in it:
    nginx writes a request's line after its response, so a client that has
    finished may not see it yet. Requests a marker URL and polls (10 s at
    most) until the marker's line is there (the servers run one nginx
    worker, which logs in order); the count includes the marker's line."""
    import time
    import urllib.error
    import urllib.request
    marker = "log-settle-%d-%d" % (os.getpid(), time.monotonic_ns())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        opener.open(base + "/" + marker, timeout=10).read()
    except urllib.error.HTTPError:
        pass
    for _ in range(200):
        lines = open(log).readlines()
        for i, line in enumerate(lines):
            if marker in line:
                return i + 1
        time.sleep(0.05)
    raise AssertionError("nginx never logged the marker %s in %s" % (marker, log))


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_pull_hf_cache(servers, tmp_path, monkeypatch):
    d, env = servers
    monkeypatch.setenv("HF_ENDPOINT", env["HTTP"])
    st = pagein.pull("hf://org/tiny/model.safetensors", cache_dir=str(tmp_path / "hub"), sync=False)
    src = os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors")
    assert st["verified"] == "sha256" and st["files"] == 1 and st["fetched"] == os.path.getsize(src)
    snap = tmp_path / "hub" / "models--org--tiny" / "snapshots" / env["HF_COMMIT"] / "model.safetensors"
    assert st["path"] == str(snap)
    assert os.path.islink(snap) and sha256(snap) == sha256(src)
    # the pulled file opens like any local model
    with pagein.safe_open(str(snap)) as f:
        assert len(f.keys()) > 0
    again = pagein.pull("hf://org/tiny/model.safetensors", cache_dir=str(tmp_path / "hub"), sync=False)
    assert again["fetched"] == 0 and again["cached"] == os.path.getsize(src)


def test_pull_s3_and_errors(servers, tmp_path, monkeypatch):
    d, env = servers
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", env["S3"])
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    out = tmp_path / "tiny.gguf"
    st = pagein.pull("s3://bkt/tiny.gguf", out, connections=4, sync=False)
    assert st["verified"] == "md5" and sha256(out) == sha256(os.path.join(d, "s3", "tiny.gguf"))
    with pytest.raises(pagein.FormatError) as e:
        pagein.pull("s3://bkt/none.gguf", tmp_path / "none.gguf", sync=False)
    assert "NoSuchKey" in str(e.value) and "s3://bkt/none.gguf" in str(e.value)
    assert not (tmp_path / "none.gguf").exists()
    with pytest.raises(pagein.FormatError):
        pagein.pull("/not/a/url")


def test_open_model_and_safe_open_remote(servers, monkeypatch):
    d, env = servers
    monkeypatch.setenv("HF_ENDPOINT", env["HTTP"])
    monkeypatch.setenv("CURL_CA_BUNDLE", env["CA"])
    local = os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors")
    for url in ("hf://org/tiny/model.safetensors", env["HTTPS"] + "/files/hf/org/tiny/model.safetensors"):
        with pagein.open_model(url, strategy="read") as m, pagein.open_model(local, strategy="read") as l:
            names = sorted(l.keys())
            assert sorted(m.keys()) == names
            for n in names:
                assert (m.get_tensor(n) == l.get_tensor(n)).all()


def test_open_model_lazy_remote(servers, monkeypatch):
    """strategy="lazy" over a URL opens the headers only (one request per
    file in nginx's log) and reads each tensor through the source when it
    is asked for; the calls that promise resident data refuse."""
    d, env = servers
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", env["S3"])
    monkeypatch.setenv("HF_ENDPOINT", env["HTTP"])
    monkeypatch.setenv("CURL_CA_BUNDLE", env["CA"])
    log = os.path.join(d, "logs", "nginx-access.log")
    local = os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors")
    url = env["HTTP"] + "/files/hf/org/tiny/model.safetensors"
    before = settled_lines(log, env["HTTP"])
    with pagein.open_model(url, strategy="lazy") as m, pagein.open_model(local, strategy="read") as l:
        assert m.strategy == "lazy"
        assert settled_lines(log, env["HTTP"]) - before == 2  # the header, nothing else (and the marker)
        assert m.keys() == l.keys()
        for n in l.keys():
            assert m.shape(n) == l.shape(n) and m.dtype(n) == l.dtype(n)
        for n in l.keys():
            assert (m.get_tensor(n) == l.get_tensor(n)).all()
        big = max(l.keys(), key=lambda n: l.get_tensor(n).nbytes)
        with pytest.raises(pagein.FormatError) as e:
            m.wait(big)
        assert "pagein_tensor_copy" in str(e.value) and big in str(e.value)
    for url, lp in (("hf://org/tiny/model.safetensors", local),
                    ("s3://bkt/tiny.gguf", os.path.join(d, "s3", "tiny.gguf"))):
        with pagein.open_model(url, strategy="lazy") as m, pagein.open_model(lp, strategy="read") as l:
            assert m.keys() == l.keys()
            for n in l.keys():
                assert (m.get_tensor(n) == l.get_tensor(n)).all()
                assert (m.get_tensor(n, dtype="float32") == l.get_tensor(n, dtype="float32")).all()
    # auto still reads a remote model into memory
    with pagein.open_model("hf://org/tiny/model.safetensors") as m:
        assert m.strategy == "read"


def test_safe_open_url(servers, monkeypatch):
    d, env = servers
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", env["S3"])
    monkeypatch.setenv("HF_ENDPOINT", env["HTTP"])
    local = os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors")
    with pagein.safe_open(local) as l:
        names = l.keys()
        want = {n: l.get_tensor(n) for n in names}
    with pagein.safe_open("hf://org/tiny/model.safetensors") as f:
        assert f.keys() == names
        for n in names:
            assert (f.get_tensor(n) == want[n]).all()
    with pagein.safe_open("s3://bkt/tiny.gguf") as f:
        assert len(f.keys()) == 12


@pytest.mark.parametrize("budget", [0, 1])
def test_open_model_prefetch_remote(servers, budget):
    """strategy="prefetch" over HTTP: layers read ahead through the range
    engine; every tensor equal to the local file during the walk and after
    it (released layers read again, arrays are copies under a budget)."""
    d, env = servers
    import json
    import numpy as np
    # 24 tensors of 1 MiB; those past 16 MiB (the most a header read keeps
    # from the start of the object) are each read from the server
    local = os.path.join(d, "www", "forked.safetensors")
    rng = np.random.default_rng(27)
    arrays = {"t%02d" % i: rng.standard_normal(1 << 18).astype(np.float32) for i in range(24)}
    hdr, off = {}, 0
    for k, a in arrays.items():
        hdr[k] = {"dtype": "F32", "shape": [a.size], "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(local, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for a in arrays.values():
            f.write(a.tobytes())
    url = env["HTTP"] + "/files/forked.safetensors"
    with pagein.open_model(local, strategy="read") as l:
        want = {n: l.get_tensor(n).copy() for n in l.keys()}
    with pagein.open_model(url, strategy="prefetch", budget=budget, prefetch=1) as m:
        assert m.strategy == "prefetch"
        # before any wait: the accessor reads the tensor itself
        last = sorted(want)[-1]
        assert (m.get_tensor(last) == want[last]).all()
        seen, kept = 0, {}
        for layer, tensors in m.layers():
            for n, a in tensors.items():
                assert (a == want[n]).all(), (layer, n)
                kept[n] = a
                seen += 1
        assert seen == len(want)
        # after the walk (with a budget every layer was given back)
        for n in want:
            assert (kept[n] == want[n]).all(), n
            assert (m.get_tensor(n) == want[n]).all(), n
        m._source().tensor_wait(last)


def test_open_model_prefetch_remote_gone(servers):
    """The object deleted after open: waits fail naming the URL; nothing
    reads as zeros."""
    d, env = servers
    path = os.path.join(d, "www", "gone.safetensors")
    shutil.copy(os.path.join(d, "www", "minicpm3.safetensors"), path)
    url = env["HTTP"] + "/files/gone.safetensors"
    os.environ["PAGEIN_HTTP_RETRIES"] = "0"
    try:
        m = pagein.open_model(url, strategy="prefetch", budget=1, prefetch=1)
        os.unlink(path)
        # the file is small: its first 256 KiB came with the open; the rest
        # of layer 0 (and everything after it) must come from the server
        with pytest.raises(pagein.Error) as e:
            for _ in m.layers():
                pass
        assert "/files/gone.safetensors" in str(e.value)
        m.close()
    finally:
        del os.environ["PAGEIN_HTTP_RETRIES"]


def test_fork_after_lazy_open(servers):
    """A child forked after a lazy remote open (a DataLoader
    worker) gets its own connections: the child and the parent read the
    tensors at the same time and both get the right bytes."""
    d, env = servers
    import json
    import numpy as np
    # 24 tensors of 1 MiB; those past 16 MiB (the most a header read keeps
    # from the start of the object) are each read from the server
    local = os.path.join(d, "www", "forked.safetensors")
    rng = np.random.default_rng(27)
    arrays = {"t%02d" % i: rng.standard_normal(1 << 18).astype(np.float32) for i in range(24)}
    hdr, off = {}, 0
    for k, a in arrays.items():
        hdr[k] = {"dtype": "F32", "shape": [a.size], "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(local, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for a in arrays.values():
            f.write(a.tobytes())
    url = env["HTTP"] + "/files/forked.safetensors"
    with pagein.open_model(url, strategy="lazy") as m, pagein.open_model(local, strategy="read") as l:
        names = sorted(l.keys())[17:]
        want = {n: l.get_tensor(n) for n in names}
        for n in names[:4]:  # connections kept alive in the pool before the fork
            assert (m.get_tensor(n) == want[n]).all()
        pid = os.fork()
        if pid == 0:
            ok = True
            try:
                for _ in range(5):
                    for n in names:
                        ok = ok and bool((m.get_tensor(n) == want[n]).all())
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        for _ in range(5):
            for n in reversed(names):
                assert (m.get_tensor(n) == want[n]).all()
        _, st = os.waitpid(pid, 0)
        assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
        for n in names:  # the child's exit left the parent's connections alone
            assert (m.get_tensor(n) == want[n]).all()


def test_pull_norange_warns(servers, tmp_path):
    """A server that ignores Range (nginx max_ranges 0) is
    pulled as one plain stream, and pull says so (a UserWarning)."""
    d, env = servers
    src = os.path.join(d, "www", "minicpm3.safetensors")
    out = tmp_path / "m.safetensors"
    with pytest.warns(UserWarning, match="ignores Range"):
        st = pagein.pull(env["HTTP"] + "/norange/minicpm3.safetensors", out, sync=False)
    assert st["fetched"] == os.path.getsize(src) and sha256(out) == sha256(src)
