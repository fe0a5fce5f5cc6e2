"Helpers shared by the bench scripts (run as `python bench/<script>.py`, so this folder is on sys.path)."
import time


def timed(fn):
    "Run `fn()` once; return (its result, elapsed wall seconds)."
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def cpu_timed(fn):
    "Run `fn()` once; return (its result, CPU seconds of this process: steadier than wall time on a loaded machine)."
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0
