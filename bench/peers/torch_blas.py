"""PyTorch's OpenBLAS threads, for the peers that time PyTorch on the cpu.

Debian's PyTorch runs its parallel loops on OpenMP's threads and its
products on the pthreads OpenBLAS's: two pools that do not share the cores.
With both at two threads on this project's two-core machine, PyTorch waited
on its own threads: the MLP training loop ran its first 2-19 steps of a
process at about 20 ms a step, 1-2 ms after; BERT-base's forward took
480-1070 ms a step against 320-420 with OpenBLAS at one thread, ResNet-18's
spiked to 100-145 ms in about a third of its steps against 40-55 (25 steps
each, two processes of each). So the peers set OpenBLAS to one thread by
default, and say so in their reports; --blas-threads=0 keeps OpenBLAS's
own choice (a thread a core)."""
import ctypes


def thread_count(text):
    count = int(text)
    if count < 0:
        raise ValueError(f"{text} is negative")
    return count


def add_argument(ap):
    ap.add_argument("--blas-threads", type=thread_count, default=1,
                    help="threads of the OpenBLAS that PyTorch's products call, where it has one of its own "
                         "(0: OpenBLAS's default, one a core)")


def limit_threads(count):
    """Sets the OpenBLAS loaded in this process (by `import torch`) to
    `count` threads. Returns what was set, for the report, or "" where
    nothing was: count 0, or no OpenBLAS of PyTorch's own (the pip wheels'
    MKL shares OpenMP's threads)."""
    if count == 0:
        return ""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libopenblas" in line}
    for path in sorted(paths):
        library = ctypes.CDLL(path)  # the library already loaded, not a second copy
        if hasattr(library, "openblas_set_num_threads"):
            library.openblas_set_num_threads(count)
            return f"OpenBLAS at {count} thread{'s' if count > 1 else ''}"
    return ""
