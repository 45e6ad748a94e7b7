"""pagein's exception classes beyond the extension's (Error, FormatError,
FileError, NotFoundError, FileNotFoundError): SafetensorError, SliceError,
DeviceError, and safetensors' wording for FileNotFoundError."""

import os as _os

from ._pagein import Error, FileNotFoundError


# The safetensors package's error class: code written for safetensors
# catches pagein's errors with `except safetensors.SafetensorError`.
SafetensorError = Error


def _os_error_str(self):
    """safetensors' wording, "No such file or directory: PATH", for
    pagein.FileNotFoundError (errno and filename stay set, as on any
    OSError; only the "[Errno 2] " prefix and the quotes go)."""
    if self.strerror and self.filename is not None:
        return "%s: %s" % (self.strerror, _os.fsdecode(self.filename) if isinstance(self.filename, bytes)
                           else self.filename)
    return OSError.__str__(self)


FileNotFoundError.__str__ = _os_error_str


def _with_note(exc, note):
    """exc with a hint as a PEP 678 note: shown under the traceback, not
    part of str(exc), whose words stay safetensors' own."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc


class SliceError(Error, IndexError):
    """get_slice(name)[index] with an index outside the tensor (a
    pagein.Error, so also SafetensorError, and an IndexError); the message
    names the axis, worded as safetensors words it."""


_NO_CUDA = -30034  # PAGEIN_E_NO_CUDA


class DeviceError(Error, RuntimeError):
    """A device that cannot be used here (device="cuda:0" without CUDA);
    pagein.Error and RuntimeError (what torch raises for it)."""
