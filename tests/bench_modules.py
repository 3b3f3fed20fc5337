"""Import a module of ``benchmarks/`` (not a package) from a test."""
import importlib
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'benchmarks')


def benchmark_module(name):
    """The module ``benchmarks/<name>.py``, imported with that folder on ``sys.path``."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(BENCHMARKS)
