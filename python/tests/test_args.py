"""Hostile arguments and headers:
integers are range-checked instead of wrapped, headers the library
accepts but numpy/torch cannot hold raise pagein.Error naming the tensor,
and a FIFO is refused at once instead of blocking."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import pagein
import stref


@pytest.fixture
def model(tmp_path, rng):
    p = str(tmp_path / "m.safetensors")
    stref.write(p, {"model.layers.%d.w" % i: ("F32", [4], stref.random_tensor(rng, "F32", [4])) for i in range(3)})
    return p


@pytest.mark.parametrize("kw", [
    {"prefetch": -1}, {"prefetch": 2 ** 32 + 1}, {"prefetch": 2 ** 32}, {"prefetch": 2 ** 64},
    {"threads": -1}, {"threads": 2 ** 32 + 1}, {"threads": 100000},
    {"hints": -1}, {"hints": 2 ** 32}, {"budget": -1}, {"budget": 2 ** 64}])
def test_open_model_rejects_out_of_range_integers(model, kw):
    (name, value), = kw.items()
    with pytest.raises(OverflowError) as ei:
        pagein.open_model(model, strategy="prefetch", **kw)
    assert name in str(ei.value) and str(value) in str(ei.value)


def test_open_model_integer_types(model):
    with pytest.raises(TypeError):
        pagein.open_model(model, prefetch=1.5)
    with pagein.open_model(model, strategy="prefetch", prefetch=np.int64(2), threads=2 ** 10,
                           budget=2 ** 64 - 1, hints=0) as m:
        assert [l for l, _ in m.layers()] == [0, 1, 2]


def test_prefetch_minus_one_does_not_hang(model):
    """open_model(strategy="prefetch", prefetch=-1) became UINT_MAX and hung
    in layers(); run in a child so a regression fails instead of hanging."""
    code = ("import sys, pagein\n"
            "try:\n"
            "    m = pagein.open_model(sys.argv[1], strategy='prefetch', prefetch=-1)\n"
            "except OverflowError as e:\n"
            "    print('refused:', e); sys.exit(0)\n"
            "list(m.layers()); print('loaded'); sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", code, model], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refused" in r.stdout


def test_layer_arguments_do_not_wrap(model):
    with pagein.open_model(model) as m:
        src = m._source()
        for bad in (2 ** 32, 2 ** 32 - 1, -(2 ** 31) - 1, 2 ** 64):
            with pytest.raises(OverflowError):
                src.layer_tensors(bad)
            with pytest.raises(OverflowError):
                src.layer_wait(bad)
            with pytest.raises(OverflowError):
                m.resident(layer=bad)
        with pytest.raises(ValueError):
            list(m.layers(prefetch=-1))


def test_save_file_align_does_not_wrap(tmp_path):
    with pytest.raises(OverflowError):
        pagein.save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "a.safetensors"), align=2 ** 64 + 8)
    with pytest.raises(OverflowError):
        pagein.save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "a.safetensors"), align=-8)


def _raw_safetensors(path, header, data=b""):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + data)


@pytest.mark.parametrize("shape,data,frameworks", [
    ([0, 2 ** 63], b"", ("np", "pt")),
    ([0, 2 ** 64 - 1], b"", ("np", "pt")),
    ([5, 0, 2 ** 63 + 5], b"", ("np", "pt")),
    ([1] * 33, b"\0" * 4, ("np",)),
])
def test_unrepresentable_headers_raise_pagein_errors(tmp_path, shape, data, frameworks):
    p = str(tmp_path / "odd.safetensors")
    _raw_safetensors(p, {"odd.weight": {"dtype": "F32", "shape": shape, "data_offsets": [0, len(data)]}}, data)
    for fw in frameworks:
        if fw == "pt":
            pytest.importorskip("torch")
        with pagein.safe_open(p, fw) as f:
            assert f.get_shape("odd.weight") == shape  # the table itself is fine
            for get in (lambda: f.get_tensor("odd.weight"), lambda: f.get_slice("odd.weight")[...],
                        lambda: f.get_tensor("odd.weight", dtype="float32")):
                with pytest.raises(pagein.Error) as ei:
                    get()
                assert "odd.weight" in str(ei.value)
        with pytest.raises(pagein.Error) as ei:
            pagein.load_file(p, framework=fw)
        assert "odd.weight" in str(ei.value)


def test_fifo_fails_at_once(tmp_path):
    """safe_open on a FIFO blocked forever in open(2) (uninterruptibly);
    it must fail at once. In a child with a timeout: a regression fails."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    code = ("import sys, pagein\n"
            "for fn in (lambda p: pagein.safe_open(p, 'np'), pagein.open_model):\n"
            "    try:\n"
            "        fn(sys.argv[1])\n"
            "    except pagein.Error as e:\n"
            "        print('refused:', e)\n"
            "    else:\n"
            "        sys.exit(3)\n")
    try:
        r = subprocess.run([sys.executable, "-c", code, fifo], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("pagein.safe_open blocked on a FIFO")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all("fifo" in l and "FIFO" in l for l in lines), r.stdout
