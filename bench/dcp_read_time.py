"""bench/dcp_read_time.py LIBPAGEIN DIR [REPS] - CPU and wall seconds of
pagein_dcp_read assembling every tensor of a DCP checkpoint REPS times
(default 3) from the page cache, through LIBPAGEIN (a libpagein.so: run two
builds alternately to compare them). For bench/dcp_gen.py --conv (4-D
chunks, rows of 3 elements), where the copies dominate."""
import ctypes
import sys
import time


class Info(ctypes.Structure):  # pagein_dcp_item_info
    _fields_ = [("name", ctypes.c_char_p), ("is_bytes", ctypes.c_int), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_uint32), ("shape", ctypes.POINTER(ctypes.c_uint64)), ("nbytes", ctypes.c_uint64),
                ("nchunks", ctypes.c_uint32)]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    d = ctypes.c_void_p()
    assert lib.pagein_dcp_open(ctypes.byref(d), sys.argv[2].encode()) == 0
    n = lib.pagein_dcp_item_count(d)
    items = []
    for i in range(n):
        info = Info()
        assert lib.pagein_dcp_item(d, ctypes.c_size_t(i), ctypes.byref(info)) == 0
        if not info.is_bytes:
            items.append((i, info.nbytes))
    buf = ctypes.create_string_buffer(max(b for _, b in items))
    c0, w0, total = time.process_time(), time.time(), 0
    for _ in range(reps):
        for i, nb in items:
            assert lib.pagein_dcp_read(d, ctypes.c_size_t(i), buf, ctypes.c_size_t(nb)) == 0
            total += nb
    print("%s: %d reads, %d MiB: %.2f s CPU, %.2f s wall" % (sys.argv[1], reps * len(items), total >> 20,
                                                               time.process_time() - c0, time.time() - w0))


if __name__ == "__main__":
    main()
