"""pagein.fsspec: an fsspec filesystem on pagein's sources and range engine,
checked against fsspec's documented conventions (AbstractFileSystem's
docstrings), against fsspec's own local and HTTP filesystems on the same
bytes, with plain-Python consumers (json, zipfile, tarfile, pandas) taking
an fsspec file, on local files and on real servers (nginx and s3rver,
started by tests/remote/servers.sh for this module and stopped after it)."""
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile

import numpy as np
import pytest

fsspec = pytest.importorskip("fsspec")

import pagein  # noqa: E402
import pagein.fsspec as pfs  # noqa: E402
from conftest import REPO  # noqa: E402

remote = pytest.mark.skipif(not pagein._pagein.remote_available(), reason="pagein built without libcurl")


@pytest.fixture
def files(tmp_path):
    """A small tree: bytes with a known pattern, JSON, a zip and a tar."""
    blob = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "blob.bin").write_bytes(blob)
    (tmp_path / "d" / "sub" / "a.json").write_text(json.dumps({"k": [1, 2, 3]}))
    (tmp_path / "d" / "sub" / "empty.bin").write_bytes(b"")
    with zipfile.ZipFile(tmp_path / "d" / "z.zip", "w") as z:
        z.writestr("inner.txt", "zipped text")
    with tarfile.open(tmp_path / "d" / "t.tar", "w") as t:
        data = b"tarred bytes"
        ti = tarfile.TarInfo("inner.bin")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return tmp_path / "d", blob


def test_protocol_is_registered_and_local_cat(files):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    assert isinstance(fs, pfs.PageinFileSystem)
    p = str(d / "blob.bin")
    # fsspec's slice rules: None = the file's ends, negative from the end,
    # clipped to the size, start >= end gives b""
    assert fs.cat_file(p) == blob
    assert fs.cat_file(p, 10, 20) == blob[10:20]
    assert fs.cat_file(p, -4) == b"tail"
    assert fs.cat_file(p, None, -4) == blob[:-4]
    assert fs.cat_file(p, len(blob) - 2, len(blob) + 100) == blob[-2:]
    assert fs.cat_file(p, 30, 10) == b""
    assert fs.cat_file(p, -10 ** 9, 3) == blob[:3]
    local = fsspec.filesystem("file")
    for s, e in [(0, 5), (-7, None), (None, 3), (5, -5), (-10, -2)]:
        assert fs.cat_file(p, s, e) == local.cat_file(p, s, e), (s, e)


def test_cat_ranges_batched_and_on_error(files):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    p, j, missing = str(d / "blob.bin"), str(d / "sub" / "a.json"), str(d / "nope.bin")
    starts = [0, 1000, 70000, 4096 * 200, -4, 0, 5]
    ends = [10, 1010, 70100, 4096 * 200 + 65536, None, None, 5]
    paths = [p, p, p, p, p, j, p]
    got = fs.cat_ranges(paths, starts, ends)
    want = fsspec.filesystem("file").cat_ranges(paths, starts, ends)
    assert got == want
    assert got[5] == (d / "sub" / "a.json").read_bytes() and got[6] == b""
    # one int for every path
    assert fs.cat_ranges([p, j], 0, 2) == [blob[:2], b'{"']
    # on_error="return" (the default): the exception in place; "raise" raises
    out = fs.cat_ranges([p, missing, p], [0, 0, 1], [1, 1, 2])
    assert out[0] == blob[:1] and out[2] == blob[1:2] and isinstance(out[1], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([p, missing], 0, 1, on_error="raise")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(missing)
    # a custom max_gap changes the merge plan, not the bytes
    assert fs.cat_ranges([p] * 3, [0, 100, 200], [50, 150, 250], max_gap=0) == [blob[0:50], blob[100:150],
                                                                               blob[200:250]]
    with pytest.raises(ValueError):
        fs.cat_ranges([p, p], [0], [1, 2])
    with pytest.raises(TypeError):
        fs.cat_ranges(p, 0, 1)


def test_cat_many_paths_is_a_dict(files):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    got = fs.cat([str(d / "blob.bin"), str(d / "sub" / "a.json")])
    assert got == {str(d / "blob.bin"): blob, str(d / "sub" / "a.json"): (d / "sub" / "a.json").read_bytes()}
    assert fs.cat(str(d / "blob.bin")) == blob
    rec = fs.cat(str(d / "sub"), recursive=True)
    assert sorted(os.path.basename(k) for k in rec) == ["a.json", "empty.bin"]


def test_info_ls_find_glob_local(files):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    local = fsspec.filesystem("file")
    info = fs.info(str(d / "blob.bin"))
    assert info["type"] == "file" and info["size"] == len(blob) and info["name"] == str(d / "blob.bin")
    assert fs.info(str(d / "sub"))["type"] == "directory"
    assert fs.isdir(str(d)) and fs.isfile(str(d / "blob.bin")) and not fs.exists(str(d / "nope"))
    with pytest.raises(FileNotFoundError):
        fs.info(str(d / "nope"))
    assert fs.ls(str(d), detail=False) == sorted(local.ls(str(d), detail=False))
    assert {e["name"]: e["type"] for e in fs.ls(str(d), detail=True)} == \
        {e["name"]: e["type"] for e in local.ls(str(d), detail=True)}
    assert fs.find(str(d)) == local.find(str(d))
    assert fs.glob(str(d / "*.bin")) == [str(d / "blob.bin")]
    assert fs.glob(str(d / "**" / "*.json")) == [str(d / "sub" / "a.json")]
    assert fs.size(str(d / "blob.bin")) == len(blob)
    assert fs.ukey(str(d / "blob.bin"))


def test_open_read_seek_and_plain_python_consumers(files):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    with fs.open(str(d / "blob.bin"), block_size=64 << 10) as f:
        assert isinstance(f, pfs.PageinFile) and f.size == len(blob)
        assert f.read(10) == blob[:10]
        f.seek(-4, 2)
        assert f.read() == b"tail"
        f.seek(500000)
        assert f.read(200000) == blob[500000:700000]  # crosses read-ahead blocks
        assert f.tell() == 700000
    with pytest.raises(NotImplementedError):
        fs.open(str(d / "new.bin"), "wb")
    # consumers that take a file object
    with fsspec.open("pagein://" + str(d / "sub" / "a.json")) as f:
        assert json.load(f) == {"k": [1, 2, 3]}
    with fsspec.open("pagein://" + str(d / "z.zip")) as f, zipfile.ZipFile(f) as z:
        assert z.read("inner.txt") == b"zipped text"
    with fsspec.open("pagein://" + str(d / "t.tar")) as f, tarfile.open(fileobj=f) as t:
        assert t.extractfile("inner.bin").read() == b"tarred bytes"
    with fsspec.open("pagein://" + str(d / "sub" / "a.json"), "rt") as f:
        assert f.read().startswith('{"k"')


def test_pandas_reads_through_pagein(tmp_path):
    pd = pytest.importorskip("pandas")
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,x\n2,y\n")
    df = pd.read_csv("pagein://" + str(p))
    assert df["a"].tolist() == [1, 2] and df["b"].tolist() == ["x", "y"]
    with fsspec.open("pagein://" + str(p)) as f:
        assert pd.read_csv(f).shape == (2, 2)


def test_get_local(files, tmp_path):
    d, blob = files
    fs = fsspec.filesystem("pagein")
    out = tmp_path / "out"
    out.mkdir()
    fs.get(str(d / "blob.bin"), str(out / "copy.bin"))
    assert (out / "copy.bin").read_bytes() == blob
    fs.get(str(d / "sub"), str(out / "tree"), recursive=True)
    assert (out / "tree" / "a.json").read_bytes() == (d / "sub" / "a.json").read_bytes()


# ---- real servers --------------------------------------------------------------

def _start(d, *which):
    script = os.path.join(REPO, "tests", "remote", "servers.sh")
    r = subprocess.run(["bash", script, "start", d, str(os.getpid()), *which], capture_output=True, text=True)
    if r.returncode == 77:
        return None, r.stdout.strip()
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(line.split("=", 1) for line in open(os.path.join(d, "env")).read().split()), ""


@pytest.fixture(scope="module")
def nginx():
    d = tempfile.mkdtemp(prefix="pagein-pyfsspec-")
    os.makedirs(os.path.join(d, "www"))
    blob = os.urandom(3 << 20) + b"end"
    open(os.path.join(d, "www", "obj.bin"), "wb").write(blob)
    open(os.path.join(d, "www", "data.json"), "w").write(json.dumps({"rows": list(range(10))}))
    with zipfile.ZipFile(os.path.join(d, "www", "z.zip"), "w") as z:
        z.writestr("x/y.txt", "from a zip over HTTP")
    # a Hub repository (servers.sh serves www/hf/ORG/NAME with the Hub's layout)
    os.makedirs(os.path.join(d, "www", "hf", "org", "tiny", "sub"))
    pagein.save_file({"w": np.arange(6, dtype=np.float32)}, os.path.join(d, "www", "hf", "org", "tiny", "model.safetensors"))
    open(os.path.join(d, "www", "hf", "org", "tiny", "config.json"), "w").write('{"layers": 2}')
    open(os.path.join(d, "www", "hf", "org", "tiny", "sub", "t.txt"), "w").write("sub file")
    env, why = _start(d, "nginx")
    if env is None:
        shutil.rmtree(d)
        pytest.skip(why)
    try:
        yield env, blob
    finally:
        subprocess.run(["bash", os.path.join(REPO, "tests", "remote", "servers.sh"), "stop", d])
        shutil.rmtree(d)


@remote
def test_http_cat_ranges_and_conventions(nginx, monkeypatch):
    env, blob = nginx
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    url = env["HTTP"] + "/obj.bin"
    fs = fsspec.filesystem("pagein")
    n = 200
    starts = [(i * 15731) % (len(blob) - 5000) for i in range(n)]
    ends = [s + 1 + (i * 37) % 4096 for i, s in enumerate(starts)]
    got = fs.cat_ranges([url] * n, starts, ends)
    assert got == [blob[s:e] for s, e in zip(starts, ends)]
    assert fs.cat_file(url, -3) == b"end" and fs.cat_file(url, 5, 2) == b""
    info = fs.info(url)
    assert info["size"] == len(blob) and info["type"] == "file" and info["name"] == url
    assert fs.ls(url, detail=False) == [url]
    # HTTP cannot list (the library's PAGEIN_E_UNSUPPORTED): find gives the object itself
    assert fs.find(url) == [url] and fs.find(url, detail=True)[url]["size"] == len(blob)
    assert fs.find(env["HTTP"] + "/none.bin") == []
    # a missing object: FileNotFoundError, in place with on_error="return"
    out = fs.cat_ranges([url, env["HTTP"] + "/none.bin"], 0, 4)
    assert out[0] == blob[:4] and isinstance(out[1], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        fs.info(env["HTTP"] + "/none.bin")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(env["HTTP"] + "/none.bin")
    # the same answers as fsspec's own HTTP filesystem (when aiohttp is here)
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return
    http = fsspec.filesystem("http", skip_instance_cache=True)
    assert http.cat_ranges([url] * 20, starts[:20], ends[:20]) == got[:20]
    assert http.cat_file(url, -3) == fs.cat_file(url, -3)


@remote
def test_http_open_chaining_and_consumers(nginx, tmp_path):
    env, blob = nginx
    url = env["HTTP"] + "/obj.bin"
    with fsspec.open("pagein://" + url) as f:
        assert f.size == len(blob)
        f.seek(1 << 20)
        assert f.read(100) == blob[1 << 20:(1 << 20) + 100]
    with fsspec.open("pagein://" + env["HTTP"] + "/data.json") as f:
        assert json.load(f) == {"rows": list(range(10))}
    with fsspec.open("pagein://" + env["HTTP"] + "/z.zip") as f, zipfile.ZipFile(f) as z:
        assert z.read("x/y.txt") == b"from a zip over HTTP"
    try:
        import aiohttp  # noqa: F401  (fsspec resolves the inner protocol's class)
        chained = True
    except ImportError:
        chained = False
    if chained:
        with fsspec.open("pagein::" + env["HTTP"] + "/data.json") as f:
            assert isinstance(f.fs, pfs.PageinFileSystem)
            assert json.load(f)["rows"][3] == 3
    # get goes through pull
    fs = fsspec.filesystem("pagein")
    fs.get(url, str(tmp_path / "obj.bin"))
    assert (tmp_path / "obj.bin").read_bytes() == blob


@remote
def test_register_override_and_unregister(nginx):
    env, blob = nginx
    url = env["HTTP"] + "/obj.bin"
    before = fsspec.get_filesystem_class("http") if _has_http() else None
    pfs.register(override=True)
    try:
        fs = fsspec.filesystem("http", skip_instance_cache=True)
        assert isinstance(fs, pfs.PageinFileSystem)
        with fsspec.open(url) as f:
            assert isinstance(f, pfs.PageinFile) and f.read(8) == blob[:8]
        assert fs.cat_ranges([url, url], [0, 10], [4, 14]) == [blob[:4], blob[10:14]]
        assert fs.cat_file(url.replace("http://", ""), 0, 3) == blob[:3]  # stripped path: scheme back
    finally:
        pfs.unregister()
    if before is not None:
        assert fsspec.get_filesystem_class("http") is before
    assert fsspec.get_filesystem_class("pagein") is pfs.PageinFileSystem


@remote
def test_hf_listing_and_reads(nginx, monkeypatch):
    env, _ = nginx
    monkeypatch.setenv("HF_ENDPOINT", env["HTTP"])
    monkeypatch.delenv("HF_TOKEN", raising=False)
    fs = pfs.PageinFileSystem(skip_instance_cache=True)
    assert fs.find("hf://org/tiny") == ["hf://org/tiny/config.json", "hf://org/tiny/model.safetensors",
                                        "hf://org/tiny/sub/t.txt"]
    assert fs.ls("hf://org/tiny", detail=False) == ["hf://org/tiny/config.json", "hf://org/tiny/model.safetensors",
                                                    "hf://org/tiny/sub"]
    assert fs.find("hf://org/tiny/sub") == ["hf://org/tiny/sub/t.txt"]
    # the Hub's listing states sizes (blobs=true): find(detail=True) opens no file
    with monkeypatch.context() as m:
        m.setattr(fs, "info", lambda *a, **k: pytest.fail("info() called: a file opened for its size"))
        found = fs.find("hf://org/tiny", detail=True)
        assert found["hf://org/tiny/config.json"]["size"] == len('{"layers": 2}')
        assert all(e["size"] > 0 for e in found.values())
    assert fs.info("hf://org/tiny/sub")["type"] == "directory"
    assert json.loads(fs.cat_file("hf://org/tiny/config.json")) == {"layers": 2}
    assert fs.find("hf://org/tiny@main/sub") == ["hf://org/tiny@main/sub/t.txt"]
    # safe_open over an fsspec handle on the Hub: read by pagein's own source
    with fs.open("hf://org/tiny/model.safetensors") as fh, pagein.safe_open(fh, "np") as f:
        assert f.get_tensor("w").tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def _has_http():
    try:
        fsspec.get_filesystem_class("http")
        return True
    except ImportError:
        return False


@pytest.fixture(scope="module")
def s3():
    d = tempfile.mkdtemp(prefix="pagein-pyfsspec-s3-")
    os.makedirs(os.path.join(d, "www"))
    os.makedirs(os.path.join(d, "s3", "dir", "sub"))
    open(os.path.join(d, "s3", "top.bin"), "wb").write(b"t" * 1000)
    open(os.path.join(d, "s3", "dir", "a.bin"), "wb").write(bytes(range(256)) * 8)
    open(os.path.join(d, "s3", "dir", "sub", "b.json"), "w").write('{"b": 1}')
    env, why = _start(d, "s3")
    if env is None:
        shutil.rmtree(d)
        pytest.skip(why)
    try:
        yield env
    finally:
        subprocess.run(["bash", os.path.join(REPO, "tests", "remote", "servers.sh"), "stop", d])
        shutil.rmtree(d)


@remote
def test_s3_listing_and_reads(s3, monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["S3"])
    monkeypatch.setenv("PAGEIN_HTTP_RETRIES", "0")
    fs = pfs.PageinFileSystem(skip_instance_cache=True)
    assert fs.find("s3://bkt/dir") == ["s3://bkt/dir/a.bin", "s3://bkt/dir/sub/b.json"]
    ls = {e["name"]: (e["type"], e["size"]) for e in fs.ls("s3://bkt/dir")}
    assert ls == {"s3://bkt/dir/a.bin": ("file", 2048), "s3://bkt/dir/sub": ("directory", 0)}
    # ls(detail=True) and find(detail=True) take sizes and ETags from the one listing: no object is opened
    with monkeypatch.context() as m:
        m.setattr(fs, "info", lambda *a, **k: pytest.fail("info() called: an object opened for its size"))
        found = fs.find("s3://bkt/dir", detail=True)
        assert {n: e["size"] for n, e in found.items()} == {"s3://bkt/dir/a.bin": 2048, "s3://bkt/dir/sub/b.json": 8}
        assert all(e["identity"].startswith('"') for e in found.values())
        assert all(e["mtime"] > 1500000000 for e in found.values())  # ListObjectsV2's LastModified
        assert [e["size"] for e in fs.ls("s3://bkt/dir") if e["type"] == "file"] == [2048]
    assert fs.info("s3://bkt/dir")["type"] == "directory"
    assert fs.info("s3://bkt/top.bin")["size"] == 1000
    assert fs.glob("s3://bkt/dir/*.bin") == ["s3://bkt/dir/a.bin"]
    assert fs.cat_ranges(["s3://bkt/dir/a.bin", "s3://bkt/top.bin"], [256, 0], [260, 2]) == [bytes(range(4)), b"tt"]
    assert json.loads(fs.cat_file("s3://bkt/dir/sub/b.json")) == {"b": 1}
    with pytest.raises(FileNotFoundError):
        fs.info("s3://bkt/none")
    pfs.register(override=True)
    try:
        with fsspec.open("s3://bkt/dir/sub/b.json") as f:
            assert json.load(f) == {"b": 1}
    finally:
        pfs.unregister()


def test_file_repr_hides_url_passwords():
    # repr() of an open file showed the URL with its user:password@
    from pagein.fsspec import PageinFile
    f = PageinFile.__new__(PageinFile)
    f.fs = object()
    f.path = "https://alice:s3cret@127.0.0.1:9/d/x.bin?X-Amz-Signature=abcdef"
    r = repr(f)
    assert "s3cret" not in r and "abcdef" not in r, r
    assert "127.0.0.1:9/d/x.bin" in r, r
