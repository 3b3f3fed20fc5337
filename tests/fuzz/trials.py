"""The trials: operator mutations enumerated from the live registry, and public-API cases.

A trial is a JSON-able dict, so the parent can hand batches to child
processes: ``{'kind': 'op', 'op': name, 'mut': [...]}`` or
``{'kind': 'api', 'name': fn_name, 'arg': ...}`` (see :mod:`.api_cases`).
"""
import importlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OPS_TESTS = os.path.join(os.path.dirname(HERE), 'ops')

#: dtypes every op is tried with.
DTYPES = ('float16', 'float32', 'float64', 'int8', 'uint8', 'int32', 'int64', 'bool')
#: special values every float input is filled with.
VALUES = ('nan', 'inf', '-inf', 'max')
#: ranks every given input is tried with (sizes 2).
RANKS = (0, 1, 5)

_SEEDS = None


def _import_opcase_modules():
    from ffnumba.testing import OpCase
    for root, _, files in os.walk(OPS_TESTS):
        for f in sorted(files):
            if f.startswith('test_') and f.endswith('.py') and f[:-3] not in sys.modules:
                if root not in sys.path:
                    sys.path.insert(0, root)
                try:
                    importlib.import_module(f[:-3])
                except Exception:       # a broken test module must not stop the fuzzing
                    continue
    found, todo = {}, list(OpCase.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo.extend(cls.__subclasses__())
        if cls.op is not None and cls.params and cls.shapes:
            from ffnumba.ops import get_op
            found.setdefault(get_op(cls.op).name, cls)
    return found


def _guess_param(f):
    from ffnumba.ops.params import REQUIRED, Shape
    if f.default is not REQUIRED:
        return None
    if f.choices:
        return f.choices[0]
    return {int: max(2, f.low or 0), float: 1.0, bool: False, str: 'a',
            Shape: (2,) if (f.low or 0) <= 2 else (f.low,), 'dtype': 'float32'}.get(f.kind)


class Seed:
    """A valid starting point for an op: params, given input shapes and an OpCase (or None)."""

    def __init__(self, op, params, shapes, case):
        self.op, self.params, self.shapes, self.case = op, dict(params), dict(shapes), case

    def instance(self):
        return self.case() if self.case is not None else None

    def make_symbol(self, p):
        import ffnumba as ff
        from ffnumba.ops import get_op
        if self.case is not None:
            return self.case().make_symbol(p)
        opdef = get_op(self.op)
        names = opdef.list_arguments(opdef.parse_params(p))
        return getattr(ff.sym, self.op)(*[ff.sym.Variable(n) for n in names], name='op', **p)


def op_seeds():
    """``{op name: Seed}`` for every registered operator (OpCase rows first, else a guess)."""
    global _SEEDS
    if _SEEDS is not None:
        return _SEEDS
    from ffnumba.ops import get_op, list_ops
    cases = _import_opcase_modules()
    seeds = {}
    for name in list_ops():
        if name.startswith('_test_'):
            continue
        cls = cases.get(name)
        if cls is not None:
            seeds[name] = Seed(name, cls.params[0], cls.shapes[0], cls)
            continue
        op = get_op(name)
        p = {k: v for k, f in op.params._fields.items()
             for v in [_guess_param(f)] if v is not None}
        try:
            args = op.list_arguments(op.parse_params(p))
        except Exception:
            continue
        seeds[name] = Seed(name, p, {a: (2, 3) for a in args}, None)
    _SEEDS = seeds
    return seeds


def bad_values(f):
    """Out-of-range and ill-typed values for one typed field (JSON-able)."""
    from ffnumba.ops.params import Shape
    out = []
    if f.kind in (int, float):
        if f.low is not None:
            out.append(f.low - 1)
        if f.high is not None:
            out.append(f.high + 1)
        out += [-1, 10 ** 12, 'abc', [1, 2]]
        if f.kind is float:
            out += [float('nan'), float('inf'), float('-inf')]
        else:
            out += [1.5, 2 ** 63]
    elif f.kind is bool:
        out += ['maybe', 2]
    elif f.kind is str:
        out += ['bogus_choice', 5]
    elif f.kind is Shape:
        out += [[], [0], [-1], [10 ** 9], [2] * 9, 'abc', [1.5]]
    elif f.kind == 'dtype':
        out += ['bogus', 'object']
    return out


def op_trials(names=None):
    """Every mutation of every op (or of ``names``)."""
    from ffnumba.ops import get_op
    seeds = op_seeds()
    trials = []
    for name in sorted(seeds if names is None else names):
        s = seeds[name]

        def add(*mut):
            trials.append({'kind': 'op', 'op': name, 'mut': list(mut)})
        add('base')
        add('zeroall')
        for arg, shape in s.shapes.items():
            for ax in range(len(shape)):
                add('zero', arg, ax)
                if len(s.shapes) > 1:
                    add('grow', arg, ax)
            for r in RANKS:
                if r != len(shape):
                    add('rank', arg, r)
        for dt in DTYPES:
            add('dtype', dt)
        for v in VALUES:
            add('value', v)
        for fname, f in get_op(name).params._fields.items():
            for v in bad_values(f):
                add('field', fname, v)
    return trials


def all_trials():
    """Operator trials followed by the public-API trials."""
    from .api_cases import api_trials
    return op_trials() + api_trials()
