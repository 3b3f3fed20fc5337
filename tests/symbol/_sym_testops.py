"""Test-only operators for the symbol and executor tests (plain numpy, CPU).

They cover what the real operators may not: several outputs with hidden
ones, a variadic input list, an auxiliary state updated in forward,
``input_attrs`` and output-to-input shape inference. Registration is
guarded so importing this module twice is harmless.
"""
import numpy as np

from ffnumba.ops.params import Params, Field
from ffnumba.ops.registry import OpDef, register_op, list_ops, shape_assign


def _same(p, ins, aux, out_shapes):
    known = next((s for s in ins if s is not None), None)
    if known is None and out_shapes:
        known = out_shapes[0]
    ins = list(ins)
    for i in range(len(ins)):
        shape_assign(ins, i, known, 'input %d' % i)
    return ins, [known], list(aux)


# ---------------------------------------------------------------- _test_twoout
def _two_infer(p, ins, aux, out_shapes):
    return list(ins), [ins[0], ins[0]], []


def _two_type(p, ins, aux):
    return list(ins), [ins[0]], []       # fewer outputs than the node has: padded


def _two_fwd(ctx, p, ins, outs, aux):
    outs[0][...] = ins[0] * 2
    outs[1][...] = ins[0] * 3


def _two_bwd(ctx, p, og, ins, outs, ig, req, aux):
    g = og[0] * 2 + og[1] * 3
    if req[0] == 'write':
        ig[0][...] = g
    elif req[0] == 'add':
        ig[0] += g


# ---------------------------------------------------------------- _test_cat
class CatParam(Params):
    num_args = Field(int, doc='Number of inputs.', low=1)
    dim = Field(int, 0, 'Axis to join along.')


def _cat_args(p):
    return ['arg%d' % i for i in range(p.num_args)]


def _cat_infer(p, ins, aux, out_shapes):
    if any(s is None for s in ins):
        return list(ins), [None], []
    out = list(ins[0])
    out[p.dim] = sum(s[p.dim] for s in ins)
    return list(ins), [tuple(out)], []


def _cat_fwd(ctx, p, ins, outs, aux):
    outs[0][...] = np.concatenate(ins, axis=p.dim)


def _cat_bwd(ctx, p, og, ins, outs, ig, req, aux):
    start = 0
    for x, g, r in zip(ins, ig, req):
        n = x.shape[p.dim]
        part = np.take(og[0], np.arange(start, start + n), axis=p.dim)
        start += n
        if r == 'write':
            g[...] = part
        elif r == 'add':
            g += part


# ---------------------------------------------------------------- _test_count
def _count_infer(p, ins, aux, out_shapes):
    return list(ins), [ins[0]], [(1,)]


def _count_fwd(ctx, p, ins, outs, aux):
    outs[0][...] = ins[0] + aux[0][0]
    if ctx.is_train:
        aux[0][0] += 1
    ctx.state['calls'] = ctx.state.get('calls', 0) + 1


def _count_bwd(ctx, p, og, ins, outs, ig, req, aux):
    if req[0] == 'write':
        ig[0][...] = og[0]
    elif req[0] == 'add':
        ig[0] += og[0]


# ---------------------------------------------------------------- _test_wmul
def _wmul_fwd(ctx, p, ins, outs, aux):
    outs[0][...] = ins[0] * ins[1]


def _wmul_bwd(ctx, p, og, ins, outs, ig, req, aux):
    for i, other in ((0, ins[1]), (1, ins[0])):
        g = og[0] * other
        if req[i] == 'write':
            ig[i][...] = g
        elif req[i] == 'add':
            ig[i] += g


# ---------------------------------------------------------------- _test_sumloss
def _loss_infer(p, ins, aux, out_shapes):
    return list(ins), [ins[0]], []


def _loss_fwd(ctx, p, ins, outs, aux):
    outs[0][...] = ins[0]


def _loss_bwd(ctx, p, og, ins, outs, ig, req, aux):
    assert og == [None]
    if req[0] == 'write':
        ig[0][...] = 1.0
    elif req[0] == 'add':
        ig[0] += 1.0


def register_all():
    """Register the test ops once per process."""
    if '_test_twoout' in list_ops():
        return
    register_op(OpDef(name='_test_twoout', arguments=['data'], infer_shape=_two_infer,
                      infer_type=_two_type, forward={'cpu': _two_fwd},
                      backward={'cpu': _two_bwd}, outputs=['output0', 'output1'],
                      num_hidden_outputs=1, doc='Two outputs: 2x and 3x.',
                      input_docs={'data': 'Input array.'}))
    register_op(OpDef(name='_test_cat', arguments=_cat_args, infer_shape=_cat_infer,
                      forward={'cpu': _cat_fwd}, backward={'cpu': _cat_bwd},
                      params=CatParam, variadic='num_args', aliases=('_test_concat',),
                      doc='Join inputs along `dim`.'))
    register_op(OpDef(name='_test_count', arguments=['data'], aux=['counter'],
                      infer_shape=_count_infer, forward={'cpu': _count_fwd},
                      backward={'cpu': _count_bwd}, doc='Adds a counter that training bumps.'))
    wmul = OpDef(name='_test_wmul', arguments=['data', 'weight'], infer_shape=_same,
                 forward={'cpu': _wmul_fwd}, backward={'cpu': _wmul_bwd},
                 doc='Elementwise data * weight.')
    wmul.input_attrs = {'weight': {'__init__': '["one", {}]'}}
    register_op(wmul)
    register_op(OpDef(name='_test_sumloss', arguments=['data'], infer_shape=_loss_infer,
                      forward={'cpu': _loss_fwd}, backward={'cpu': _loss_bwd}, is_loss=True,
                      doc='Identity forward; gradient of sum(data).'))


register_all()
