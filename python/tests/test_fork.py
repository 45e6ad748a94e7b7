"""fork() after open_model: DataLoader workers and
preloading servers (gunicorn --preload) fork after opening. The child's
layers() must not hang (the prefetch pager's thread does not survive fork;
the library restarts it in the child) and must give the same bytes; the
parent keeps working. Each child runs under alarm() and reports through its
exit status, so a regression fails instead of hanging."""
import os
import signal

import pytest

import pagein
from test_model import STRATEGIES, make_model


def _walk(m, ref):
    got = {}
    for _, tensors in m.layers():
        got.update({k: v.tobytes() for k, v in tensors.items()})
    return got == {k: v[2] for k, v in ref.items()}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("first_wait", [False, True])
def test_fork_after_open(tmp_path, rng, strategy, first_wait):
    path, ref = make_model(str(tmp_path), rng, layers=4)
    with pagein.open_model(path, strategy=strategy, prefetch=1) as m:
        if first_wait:
            next(iter(m.layers()))
        pid = os.fork()
        if pid == 0:  # child: no pytest machinery from here on
            code = 3
            try:
                signal.alarm(20)
                code = 0 if _walk(m, ref) else 1
                m.close()
            except BaseException:
                code = 2
            os._exit(code)
        assert _walk(m, ref)
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail("child killed by signal %d%s" % (os.WTERMSIG(status),
                    " (hung: alarm after 20 s)" if os.WTERMSIG(status) == signal.SIGALRM else ""))
    assert os.WEXITSTATUS(status) == 0, "child: wrong bytes (1) or an exception (2)"
