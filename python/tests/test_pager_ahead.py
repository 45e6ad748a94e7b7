"""The prefetch pager with extreme lookahead values: any
value the binding accepts (up to 2**32 - 1) must walk the model, not hang
(cursor + ahead overflowed int32 in the C pager). Each run is in a forked
child under alarm() so a regression fails instead of hanging. Out-of-range
values (negative, 2**32 and more) are the binding's argument parsing."""
import os
import signal

import pytest

import pagein
from test_model import make_model


@pytest.mark.parametrize("ahead", [2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1])
@pytest.mark.parametrize("budget", [0, 1 << 20])
def test_prefetch_extreme_ahead(tmp_path, rng, ahead, budget):
    path, ref = make_model(str(tmp_path), rng, layers=4)
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            signal.alarm(20)
            with pagein.open_model(path, strategy="prefetch", prefetch=ahead, budget=budget) as m:
                got = {}
                for _, tensors in m.layers():
                    got.update({k: v.tobytes() for k, v in tensors.items()})
                code = 0 if got == {k: v[2] for k, v in ref.items()} else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail("child killed by signal %d%s" % (os.WTERMSIG(status),
                    " (hung: alarm after 20 s)" if os.WTERMSIG(status) == signal.SIGALRM else ""))
    assert os.WEXITSTATUS(status) == 0, "child: wrong bytes (1) or an exception (2)"
