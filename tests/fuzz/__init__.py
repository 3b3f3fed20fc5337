"""Property-based fuzzing of the operator registry and the public API.

Every trial runs in a child process under a time and memory limit; the
parent classifies each trial as

* ``clean``: it ran, or it raised an :class:`~ffnumba.base.FFError` whose
  message leaks no numba/numpy/Python internals;
* ``crash``: the child died on a signal (segfault, LLVM abort);
* ``hang``: no answer within the time limit;
* ``nonff``: an exception other than FFError reached the user;
* ``leak``: an FFError whose message carries internal text (numba typing
  errors, numpy's reshape messages, a wrapped ``ValueError:``...);
* ``wrong``: the call succeeded but the result contradicts shape inference
  or the numpy reference of the op's OpCase, or holds -FLT_MAX garbage.

Trials come from the live registry (:func:`ffnumba.ops.list_ops`), so ops
added later are fuzzed without touching this package. Run everything with
``python -m tests.fuzz --full`` (see ``__main__``); ``tests/fuzz/test_fuzz.py``
runs a fixed-seed subset in the normal test suite.
"""
