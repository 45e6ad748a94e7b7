"""bench/dcp_ref.py - the reference readers of bench/dcp.sh, on torch 1.13:

  dcp_ref.py fs DIR          torch's own FileSystemReader + load_state_dict
                             (no process group) into full tensors
  dcp_ref.py fsspec URL      a serial per-item fsspec reader, as DCP's
                             FsspecReader read before PyTorch PR #194881:
                             .metadata fetched and unpickled by torch's
                             classes, then for every storage item one
                             fs.cat_file(url, start, end) after the other,
                             torch.load of each blob, copied into place
  dcp_ref.py pagein URL|DIR  torch's own load_state_dict driving
                             pagein.dcp.Reader (one range-engine run per
                             plan); prints the reader's stats too
DCP_REF_TOUCH=1: the state dict's tensors are written (zeros) before the
load, as an initialized model's are; else fresh (torch.empty).

Prints the tensor bytes loaded. torch's DCP package is imported through
pagein._dcpcompat's Python 3.11 workaround (docs/PYTHON.md)."""
import io
import os
import pickle
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
from pagein import _dcpcompat  # noqa: E402


def full_tensors(md):
    # DCP_REF_TOUCH=1: written once before the load, as the parameters of an initialized model are
    make = torch.zeros if os.environ.get("DCP_REF_TOUCH") == "1" else torch.empty
    return {k: make(v.size, dtype=v.properties.dtype) for k, v in md.state_dict_metadata.items()
            if hasattr(v, "chunks")}


def fs_load(path):
    dcp = _dcpcompat.import_torch_dcp()
    md = dcp.FileSystemReader(path).read_metadata()
    sd = full_tensors(md)
    dcp.load_state_dict(sd, storage_reader=dcp.FileSystemReader(path), no_dist=True)
    return sum(t.numel() * t.element_size() for t in sd.values())


def fsspec_serial(url):
    import fsspec
    _dcpcompat.import_torch_dcp()  # the classes the pickle names
    fs = fsspec.filesystem("http")
    md = pickle.loads(fs.cat_file(url + "/.metadata"))
    sd = full_tensors(md)
    n = 0
    for idx, info in md.storage_data.items():
        if idx.fqn not in sd:
            continue
        blob = fs.cat_file(url + "/" + info.relative_path, start=info.offset, end=info.offset + info.length)
        t = torch.load(io.BytesIO(blob))
        dst = sd[idx.fqn]
        for d, (o, s) in enumerate(zip(idx.offset, t.shape)):
            dst = dst.narrow(d, o, s)
        dst.copy_(t)
        n += t.numel() * t.element_size()
    return n


def pagein_reader(where):
    import time
    import pagein.dcp
    dcp = _dcpcompat.import_torch_dcp()
    t0 = time.monotonic()  # imports excluded: the load from opening the checkpoint on
    reader = pagein.dcp.Reader(where)
    md = reader.read_metadata()
    t1 = time.monotonic()
    sd = full_tensors(md)  # the caller's tensors (and their zeroing with DCP_REF_TOUCH=1): not the load's time
    t2 = time.monotonic()
    dcp.load_state_dict(sd, storage_reader=reader, no_dist=True)
    t3 = time.monotonic()
    print("load_s=%.3f alloc_s=%.3f" % (t3 - t2 + t1 - t0, t2 - t1), reader.stats, file=sys.stderr)
    return sum(t.numel() * t.element_size() for t in sd.values())


if __name__ == "__main__":
    mode, where = sys.argv[1], sys.argv[2]
    print({"fs": fs_load, "fsspec": fsspec_serial, "pagein": pagein_reader}[mode](where))
