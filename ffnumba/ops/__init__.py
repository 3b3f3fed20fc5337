"""Operators: the registry and every op family.

Importing this package imports every module under ``nn/``, ``tensor/`` and
``loss/``; each registers its operators with :func:`register_op`. A new
operator is one new (or extended) family file and one test file.
"""
import importlib
import pkgutil

from .registry import OpDef, OpContext, register_op, get_op, list_ops, gpu_missing

for _family in ('nn', 'tensor', 'loss'):
    _pkg = importlib.import_module('%s.%s' % (__name__, _family))
    for _info in sorted(pkgutil.iter_modules(_pkg.__path__), key=lambda m: m.name):
        if not _info.name.startswith('_'):
            importlib.import_module('%s.%s' % (_pkg.__name__, _info.name))
