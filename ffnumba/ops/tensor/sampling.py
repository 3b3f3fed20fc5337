"""Sampling operators for symbols: ``_random_uniform``, ``_random_normal``,
``_sample_multinomial``, ``_shuffle`` (MXNet's ``mx.sym.random.*`` nodes).

=====================  ========  ===============================================
op                     inputs    output
=====================  ========  ===============================================
_random_uniform        (none)    ``shape`` draws on ``[low, high)``
_random_normal         (none)    ``shape`` draws, mean ``loc``, std ``scale``
_sample_multinomial    data      ``data.shape[:-1] + shape`` category indices,
                                 drawn from the probabilities on ``data``'s last
                                 axis (int32 by default)
_shuffle               data      ``data`` with its first axis permuted
=====================  ========  ===============================================

Random source: every draw comes from the global generator of
:mod:`ffnumba.random` at forward time, so ``ff.random.seed(n)`` before a
forward makes it repeat exactly, also for an executor bound earlier (what
MXNet's ``mx.random.seed`` does for its global random resource). The numbers
differ from MXNet's for the same seed (another generator). On a GPU the draw
is made on the host and copied over (a counter-based device generator would
change the numbers between devices; MXNet's seeded runs agree per device only).

None of them has a gradient (MXNet registers none for the samplers; for
``_shuffle`` MXNet has none either): backward writes zeros where asked.

Source of the parameterisations: MXNet 1.9.1 ``src/operator/random/
sample_op.cc``, ``sample_multinomial_op.cc`` and ``shuffle_op.cc`` docs.
"""
import numpy as np

from ... import random as _random
from ...base import FFError, ParamError, ShapeError
from ...dtype import np_dtype
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op

__all__ = ['UniformParam', 'NormalParam', 'MultinomialParam', 'ShuffleParam']

_CTX_DOC = 'Context of the output (kept for MXNet compatibility; the executor decides).'


def _draw_fields():
    return dict(shape=Field(Shape, Shape(), 'Output shape.', low=0),
                ctx=Field(str, '', _CTX_DOC),
                dtype=Field('dtype', 'float32', 'Output dtype (float16, float32, float64).'))


def _check_float(p):
    if not np.issubdtype(np_dtype(p.dtype), np.floating):
        raise ParamError('%s: `dtype` must be a float type. Received: dtype=%s'
                         % (p._what, p.dtype))


def _validate_uniform(self):
    _check_float(self)
    if not self.low <= self.high:
        raise ParamError('_random_uniform: `low` must be <= `high`. Received: low=%s, '
                         'high=%s' % (self.low, self.high))


def _validate_normal(self):
    _check_float(self)
    if not self.scale >= 0:
        raise ParamError('_random_normal: `scale` must be >= 0. Received: scale=%s'
                         % self.scale)


# MXNet's declaration order (positional params): the distribution's, then shape, ctx, dtype
UniformParam = type('UniformParam', (Params,), dict(
    dict(low=Field(float, 0.0, 'Lower bound of the interval (included).'),
         high=Field(float, 1.0, 'Upper bound of the interval (excluded).')),
    **_draw_fields(), _what='_random_uniform', validate=_validate_uniform,
    __doc__='Parameters of ``_random_uniform``.'))
NormalParam = type('NormalParam', (Params,), dict(
    dict(loc=Field(float, 0.0, 'Mean of the distribution.'),
         scale=Field(float, 1.0, 'Standard deviation of the distribution (>= 0).')),
    **_draw_fields(), _what='_random_normal', validate=_validate_normal,
    __doc__='Parameters of ``_random_normal``.'))


class MultinomialParam(Params):
    """Parameters of ``_sample_multinomial``."""

    shape = Field(Shape, Shape(), 'Draws per distribution (appended to the output shape).',
                  low=0)
    get_prob = Field(bool, False, "MXNet's second output (log-probabilities); "
                                  'not supported, must be False.')
    dtype = Field('dtype', 'int32', 'Output dtype (int32 default; any numeric dtype).')

    def validate(self):
        if self.get_prob:
            raise ParamError('_sample_multinomial: `get_prob=True` is not supported (it '
                             'needs autograd); use get_prob=False. Received: get_prob=True')


class ShuffleParam(Params):
    """Parameters of ``_shuffle`` (none)."""


# ------------------------------------------------------------------ draws (host)
def _host_draw(what, draw, size):
    """``draw()``, with running out of memory as an FFError naming the op and size."""
    try:
        return draw()
    except MemoryError:
        raise FFError('%s: cannot draw %s samples: out of memory' % (what, size)) from None


def _uniform(p, size):
    return _host_draw('_random_uniform', lambda: _random.generator().uniform(p.low, p.high, size),
                      size)


def _normal(p, size):
    return _host_draw('_random_normal', lambda: _random.generator().normal(p.loc, p.scale, size),
                      size)


def _multinomial(p, data):
    probs = np.asarray(data, dtype=np.float64)
    k = probs.shape[-1]
    rows = probs.reshape(-1, k)
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ParamError('_sample_multinomial: `data` must hold finite probabilities >= 0')
    n = int(np.prod(p.shape, dtype=np.int64))
    u = _random.generator().random((rows.shape[0], n))
    out = np.empty((rows.shape[0], n), dtype=np.int64)
    for r in range(rows.shape[0]):
        cum = np.cumsum(rows[r])
        # MXNet draws u on [0, 1) and takes the first category whose cumulative sum exceeds it
        out[r] = np.minimum(np.searchsorted(cum, u[r] * cum[-1], side='right'), k - 1)
    return out.reshape(probs.shape[:-1] + tuple(p.shape))


def _shuffle(p, data):
    return data[_random.generator().permutation(data.shape[0])] if data.ndim else data.copy()


# ------------------------------------------------------------------ registry glue
def _draw_shape(p, in_shapes, aux_shapes, out_shapes):
    return [], [tuple(p.shape)], []


def _draw_type(p, in_types, aux_types):
    return [], [np_dtype(p.dtype)], []


def _multi_shape(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    if d is None:
        return [None], [None], []
    if len(d) == 0:
        raise ShapeError('_sample_multinomial: `data` must have at least 1 dimension (the '
                         'categories). Received: shape %s' % (tuple(d),))
    return [tuple(d)], [tuple(d[:-1]) + tuple(p.shape)], []


def _multi_type(p, in_types, aux_types):
    return [in_types[0]], [np_dtype(p.dtype)], []


def _same_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    return ins, [None if ins[0] is None else tuple(ins[0])], []


def _same_type(p, in_types, aux_types):
    return list(in_types), [in_types[0]], []


def _zero_grads_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    for g, r in zip(in_grads, req):
        if r == 'write':
            g[...] = 0


def _zero_grads_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    for g, r in zip(in_grads, req):
        if r == 'write':
            g.copy_to_device(np.zeros(g.shape, g.dtype))


def _register(name, aliases, params, arguments, infer_shape, infer_type, compute, doc,
              input_docs=None):
    def forward_cpu(ctx, p, inputs, outputs, aux):
        out = outputs[0]
        out[...] = compute(p, *(list(inputs) or [out.shape])).astype(out.dtype, copy=False)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        out = outputs[0]
        host = [np.asarray(a.copy_to_host()) for a in inputs] or [out.shape]
        out.copy_to_device(np.ascontiguousarray(compute(p, *host).astype(out.dtype)))

    register_op(OpDef(
        name=name, aliases=aliases, arguments=arguments, infer_shape=infer_shape,
        infer_type=infer_type,
        forward={'cpu': forward_cpu, 'gpu': forward_gpu},
        backward={'cpu': _zero_grads_cpu, 'gpu': _zero_grads_gpu}, params=params,
        hint=name, doc=doc, input_docs=input_docs or {}))


_register('_random_uniform', ('uniform', 'random_uniform'), UniformParam, [], _draw_shape,
          _draw_type, _uniform,
          'Draws from the uniform distribution on [low, high) (MXNet '
          '``mx.sym.random.uniform``).\n\nOutput: `shape`, `dtype` (float32).\n')
_register('_random_normal', ('normal', 'random_normal'), NormalParam, [], _draw_shape,
          _draw_type, _normal,
          'Draws from the normal distribution N(loc, scale**2) (MXNet '
          '``mx.sym.random.normal``).\n\nOutput: `shape`, `dtype` (float32).\n')
_register('_sample_multinomial', ('sample_multinomial',), MultinomialParam, ['data'],
          _multi_shape, _multi_type,
          _multinomial,
          'Category indices drawn from the distributions on the last axis of `data` (MXNet '
          '``mx.sym.random.multinomial``).\n\nOutput: data.shape[:-1] + shape, int32.\n',
          {'data': 'Probabilities (..., K), each row summing to 1 (rows are normalised).'})
_register('_shuffle', ('shuffle',), ShuffleParam, ['data'], _same_shape, _same_type,
          _shuffle,
          'A copy of `data` with its first axis randomly permuted (MXNet '
          '``mx.sym.random.shuffle``).\n', {'data': 'Any array of rank >= 1.'})
