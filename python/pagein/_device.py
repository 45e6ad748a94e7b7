"""Device arguments (cpu, cuda, cuda:N, N, torch.device) and the CPU/CUDA
paths a tensor takes."""

import operator as _operator
import sys as _sys

import numpy as _np

from ._pagein import Error, FormatError
from ._tensor import _np_array, _torch_tensor


# ---------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------

def _cuda_current():
    """torch's current CUDA device when torch has set one up, else 0 (what
    "cuda" without an index means)."""
    torch = _sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:  # pragma: no cover - depends on the machine
        pass
    return 0


def _parse_device(device):
    """The one place a device argument is parsed. Accepts what safetensors
    accepts: "cpu", "cuda", "cuda:N", an int N (CUDA device N), a
    torch.device, or None (cpu). Returns ("cpu", None) or ("cuda", N)."""
    if device is None:
        return "cpu", None
    if isinstance(device, (bool, _np.bool_)):
        raise TypeError("device must be a str, an int or a torch.device, not bool")
    if isinstance(device, str):
        kind, sep, rest = device.partition(":")
        index = None
        if sep:
            if not (rest.isascii() and rest.isdigit()):
                raise FormatError("invalid device %r (use 'cpu', 'cuda', 'cuda:N', N or a torch.device)"
                                  % (device,))
            index = int(rest)
    elif type(device).__module__.split(".")[0] == "torch" and hasattr(device, "type") \
            and hasattr(device, "index"):
        kind, index = device.type, device.index
    else:
        try:
            index = _operator.index(device)
        except TypeError:
            raise TypeError("device must be a str, an int or a torch.device, not %s"
                            % type(device).__name__) from None
        if index < 0:
            raise ValueError("device index must be >= 0, not %d" % index)
        kind = "cuda"
    if kind == "cpu":
        return "cpu", None
    if kind == "cuda":
        return "cuda", _cuda_current() if index is None else index
    raise FormatError("device %s is invalid for pagein (use 'cpu', 'cuda', 'cuda:N', N or a torch.device)"
                      % (device,))


def _device_str(dev):
    return "cpu" if dev[0] == "cpu" else "cuda:%d" % dev[1]


def _gpu_loader(dev, fw):
    """pagein._gpu for a CUDA device (imported on first use), or None for
    the CPU. Raises pagein.Error when it cannot be used."""
    if dev[0] == "cpu":
        return None
    if fw == "np":
        raise FormatError("Device %s is not supported for framework numpy (numpy arrays live on the CPU; "
                          "use framework='pt' for CUDA)" % _device_str(dev))
    try:
        from . import _gpu
    except Exception as e:
        raise Error("CUDA device %r requested but pagein's GPU loader (pagein._gpu) cannot be used: %s: %s"
                    % (_device_str(dev), type(e).__name__, e)) from e
    return _gpu


def _convert(src, rec, fw, copy):
    """One tensor on the CPU: zero-copy unless copy."""
    if fw == "np":
        a = _np_array(src, rec)
        return _np.array(a, copy=True) if copy else a
    t = _torch_tensor(src, rec)
    return t.clone() if copy else t
