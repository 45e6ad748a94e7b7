"""One sample shape per format family (docs/TRAINING-DATA.md): JSONL and
text files give bytes whether plain, .gz or .zst, with the same default
shuffle; a .json file that holds one JSON array (or one value over several
lines) is refused by name instead of being read as line fragments; the
arrays of a ShardDataset's fields are writable, so torch takes them without
its "not writable" warning."""
import gzip
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pagein.data as pd
from conftest import REPO


@pytest.fixture
def lines(tmp_path):
    rows = [json.dumps({"text": "row %d" % i}).encode() for i in range(50)]
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"\n".join(rows) + b"\n")
    gzip.open(str(tmp_path / "a.jsonl.gz"), "wb").write(p.read_bytes())
    try:
        subprocess.run(["zstd", "-q", str(p), "-o", str(tmp_path / "a.jsonl.zst")], check=True)
    except (OSError, subprocess.CalledProcessError):
        pass
    return tmp_path, rows


def test_line_files_one_shape(lines):
    d, rows = lines
    names = ["a.jsonl", "a.jsonl.gz"] + (["a.jsonl.zst"] if (d / "a.jsonl.zst").exists() else [])
    for n in names:
        ds = pd.Dataset(str(d / n), shuffle="none")
        assert type(ds) is pd.Dataset and ds.shuffle == "none", n
        assert list(ds) == rows, n
        assert pd.Dataset(str(d / n)).shuffle == "global", n  # one default for the family
        assert sorted(pd.Dataset(str(d / n), seed=3)) == sorted(rows), n


def test_json_array_refused_by_name(tmp_path):
    a = tmp_path / "arr.json"
    a.write_text(json.dumps([{"text": "a"}, {"text": "b"}], indent=1))
    with pytest.raises(pd.FormatError, match="arr.json: a JSON array, not JSON Lines"):
        pd.Dataset(str(a))
    o = tmp_path / "obj.json"
    o.write_text(json.dumps({"text": "a", "n": 1}, indent=2))
    with pytest.raises(pd.FormatError, match="obj.json: a JSON document over several lines"):
        pd.Dataset(str(o))
    ok = tmp_path / "ok.json"  # JSON Lines under a .json name is still read
    ok.write_text('{"a": 1}\n{"a": 2}\n')
    assert list(pd.Dataset(str(ok), shuffle="none")) == [b'{"a": 1}', b'{"a": 2}']


def test_fields_writable_no_torch_warning(tmp_path):
    d = tmp_path / "fx"
    subprocess.check_call([sys.executable, os.path.join(REPO, "tests", "dataformats_gen.py"), str(d)])
    ds = pd.Dataset(str(d / "mds"), shuffle="none")
    s = next(iter(ds))
    arrays = [v for v in s.values() if isinstance(v, np.ndarray)]
    assert arrays and all(a.flags.writeable for a in arrays), {k: type(v) for k, v in s.items()}
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a in arrays:
            torch.as_tensor(a)
        default_collate([{k: v for k, v in s.items() if isinstance(v, np.ndarray)}] * 2)
