"""A plain torch DataLoader with workers and no loader_batch_size= on the
dataset: state_dict(samples_seen=) is exact or raises (it returned a state
computed for batches of 1: 4 of 100 samples repeated and 4 lost)."""
import numpy as np
import pytest

import pagein.data as pd

torch = pytest.importorskip("torch")


def _records(tmp_path, n=100):
    p = str(tmp_path / "r.bin")
    np.arange(n, dtype=np.uint32).tofile(p)
    return p


@pytest.mark.parametrize("order", ["global", "block", "none"])
def test_plain_dataloader_workers_state_exact_or_raise(tmp_path, order):
    p = _records(tmp_path)
    for given in (False, True):
        kw = {"batch_size": 4} if given else {}  # Dataset: the DataLoader's batch size
        ds = pd.Dataset(p, record_size=4, shuffle=order, seed=3, return_ids=True, **kw)
        dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: b)
        consumed = []
        for k, batch in enumerate(dl):
            consumed += [int(i) for i, _ in batch]
            if k == 4:  # 5 batches: worker 0 gave 3, worker 1 gave 2
                break
        if not given:
            with pytest.raises(ValueError, match="batch_size"):
                ds.state_dict(samples_seen=20)
            continue
        st = ds.state_dict(samples_seen=20)
        rest = pd.Dataset(p, record_size=4, shuffle=order, seed=3, return_ids=True)
        rest.load_state_dict(st)
        left = [int(i) for i in rest.ids(0, 1)]
        assert len(consumed) == 20 and not set(consumed) & set(left), (order, sorted(set(consumed) & set(left)))
        assert sorted(consumed + left) == list(range(100))
