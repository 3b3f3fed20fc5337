"""One lock per module, held while a prediction batch runs and its outputs are copied.

A module owns one set of executors: their input and output buffers are
shared by every call. Two threads predicting at once would overwrite each
other's inputs (and, when batch sizes differ, re-shape the executors under
each other), returning another thread's rows or a spurious ShapeError.
``predict``, ``iter_predict`` and ``score`` hold :func:`lock` from loading a
batch to copying its outputs, so concurrent calls are correct and run one
batch at a time. See ``docs/guide/threads.md``.
"""
import threading

__all__ = ['lock']

_CREATE = threading.Lock()


def lock(module):
    """The re-entrant inference lock of ``module`` (created on first use)."""
    lk = module.__dict__.get('_ff_inference_lock')
    if lk is None:
        with _CREATE:
            lk = module.__dict__.setdefault('_ff_inference_lock', threading.RLock())
    return lk
