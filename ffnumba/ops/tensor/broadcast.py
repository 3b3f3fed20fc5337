"""Binary arithmetic and comparisons with numpy broadcasting (``broadcast_*``).

Math
----
=======================  =====================  ==============================
op                       out = f(l, r)          (d out/d l, d out/d r)
=======================  =====================  ==============================
broadcast_add (plus)     l + r                  (1, 1)
broadcast_sub (minus)    l - r                  (1, -1)
broadcast_mul            l * r                  (r, l)
broadcast_div            l / r                  (1/r, -l/r^2)
broadcast_power          l ** r                 (r l^(r-1), l^r ln l)
broadcast_maximum        max(l, r)              (l >= r, l < r)
broadcast_minimum        min(l, r)              (l <= r, l > r)
broadcast_equal          l == r  (1.0 or 0.0)   (0, 0)
broadcast_not_equal      l != r                 (0, 0)
broadcast_greater        l > r                  (0, 0)
broadcast_greater_equal  l >= r                 (0, 0)
broadcast_lesser         l < r                  (0, 0)
broadcast_lesser_equal   l <= r                 (0, 0)
=======================  =====================  ==============================

A tie in ``broadcast_maximum``/``broadcast_minimum`` sends the whole gradient
to ``lhs`` (MXNet 1.9.1 does the same). Comparisons return 1.0/0.0 in the
inputs' dtype. The gradient of an operand that was broadcast is summed over
the broadcast axes.

Shapes
------
Numpy's rule: align the shapes on the right; each pair of axes must be equal
or one of them 1; the output takes the larger. ``(2, 1, 3)`` and ``(4, 1)``
give ``(2, 4, 3)``. Shapes that do not fit raise ``ShapeError`` naming both.

Source: MXNet 1.x ``broadcast_*`` operator documentation; numpy broadcasting.
"""


from ...base import ShapeError
from ..registry import OpDef, register_op
from ..broadcast_templates import make_binary_broadcast
from .._float_compute import float64_compute

__all__ = ['broadcast_shape', 'BROADCAST']


def broadcast_shape(lshape, rshape):
    """The numpy-broadcast shape of two shapes.

    Raises
    ------
    ShapeError
        ``operands could not be broadcast together with shapes (..) (..)``.
    """
    nd = max(len(lshape), len(rshape))
    a = (1,) * (nd - len(lshape)) + tuple(lshape)
    b = (1,) * (nd - len(rshape)) + tuple(rshape)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ShapeError('operands could not be broadcast together with shapes %s (lhs) '
                             'and %s (rhs)' % (tuple(lshape), tuple(rshape)))
        out.append(y if x == 1 else x)
    return tuple(out)


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None or ins[1] is None:
        return ins, [None], list(aux_shapes)
    return ins, [broadcast_shape(ins[0], ins[1])], list(aux_shapes)


#: Scalar bodies divide by zero the IEEE way (inf/nan), never raise.
# The scalar bodies are the elementwise ops' own (one body per formula, STYLE E2):
# d(x*y)/dx is y (``_rhs``), d(x*y)/dy is x (``_lhs``); maximum sends a tie to the lhs.
from .elemwise import (_one2 as _one, _neg_one2 as _minus_one, _zero2 as _zero, _add, _sub,  # noqa: E402
                       _mul, _rhs as _mul_da, _lhs as _mul_db, _div, _div_dl as _div_da,
                       _div_dr as _div_db, _pow, _pow_dl as _pow_da, _pow_dr as _pow_db, _max,
                       _min, _eq, _ne, _gt, _ge, _lt, _le)


#: name -> (f, d/dlhs, d/drhs, aliases, one-line summary).
BROADCAST = {
    'broadcast_add': (_add, _one, _one, ('broadcast_plus',), 'Sum with broadcasting.'),
    'broadcast_sub': (_sub, _one, _minus_one, ('broadcast_minus',),
                      'Difference with broadcasting.'),
    'broadcast_mul': (_mul, _mul_da, _mul_db, (), 'Product with broadcasting.'),
    'broadcast_div': (_div, _div_da, _div_db, (), 'Quotient with broadcasting.'),
    'broadcast_power': (_pow, _pow_da, _pow_db, (), 'lhs to the power rhs, with broadcasting.'),
    'broadcast_maximum': (_max, _ge, _lt, (), 'Elementwise maximum with broadcasting.'),
    'broadcast_minimum': (_min, _le, _gt, (), 'Elementwise minimum with broadcasting.'),
    'broadcast_equal': (_eq, _zero, _zero, (), '1 where lhs == rhs, else 0 (broadcasting).'),
    'broadcast_not_equal': (_ne, _zero, _zero, (), '1 where lhs != rhs, else 0 (broadcasting).'),
    'broadcast_greater': (_gt, _zero, _zero, (), '1 where lhs > rhs, else 0 (broadcasting).'),
    'broadcast_greater_equal': (_ge, _zero, _zero, (),
                                '1 where lhs >= rhs, else 0 (broadcasting).'),
    'broadcast_lesser': (_lt, _zero, _zero, (), '1 where lhs < rhs, else 0 (broadcasting).'),
    'broadcast_lesser_equal': (_le, _zero, _zero, (),
                               '1 where lhs <= rhs, else 0 (broadcasting).'),
}

#: what the backward of a broadcast op reads where it is not both operands: the
#: derivatives of + and - are constants, the comparisons' are zero.
BROADCAST_READS = dict({'broadcast_add': (), 'broadcast_sub': ()},
                       **{n: () for n, v in BROADCAST.items() if v[1] is _zero})

for _name, (_f, _da, _db, _aliases, _summary) in BROADCAST.items():
    _fwd, _bwd = make_binary_broadcast(_f, _da, _db)
    if _name == 'broadcast_power':      # x ** n on ints aborts in LLVM: see ops._float_compute
        _fwd, _bwd = float64_compute(_fwd, _bwd)
    register_op(OpDef(
        name=_name,
        aliases=_aliases,
        backward_reads=BROADCAST_READS.get(_name, ('lhs', 'rhs')),
        zero_gradient=_da is _zero and _db is _zero,    # the comparisons (MakeZeroGradNodes)
        arguments=['lhs', 'rhs'],
        infer_shape=_infer_shape,
        forward=_fwd,
        backward=_bwd,
        doc='%s\n\nNumpy broadcasting; see the table in ``ffnumba.ops.tensor.broadcast``.\n'
            % _summary,
        input_docs={'lhs': 'First input.', 'rhs': 'Second input.'},
    ))
