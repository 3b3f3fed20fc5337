"""MXNet's imperative optimizer update operators (``sgd_update``, ``adam_update``, ...).

Hand-written MXNet training loops call them as ``mx.nd.sgd_update(weight,
grad, lr=0.1, wd=1e-4, out=weight)``. Each is a registry operator whose
forward runs the fused step of the matching optimizer (the same scalar step
bodies and kernels as :mod:`ffnumba.optimizer.sgd`, ``adam`` and
``adaptive``; no second copy of the math):

* the output is the updated weight (the input ``weight`` itself changes only
  when it is also the output, ``out=weight``, as in MXNet);
* the state inputs (``mom``, ``mean``/``var``, ``n``, ``z``, ``weight32``...)
  are updated in place, as MXNet's mutable inputs are.

=================  ===============================  ==============================
op                 inputs                           step (see the optimizer docs)
=================  ===============================  ==============================
sgd_update         weight, grad                     SGD
sgd_mom_update     weight, grad, mom                SGD with momentum
nag_mom_update     weight, grad, mom                NAG
adam_update        weight, grad, mean, var          Adam (no bias correction: the
                                                    Adam optimizer folds it into lr)
rmsprop_update     weight, grad, n                  RMSProp
rmspropalex_update weight, grad, n, g, delta        RMSProp, centered (Graves)
ftrl_update        weight, grad, z, n               Ftrl
signsgd_update     weight, grad                     signSGD
signum_update      weight, grad, mom                Signum
ftml_update        weight, grad, d, v, z            FTML (``t`` is the step count,
                                                    ``clip_grad`` the clip bound)
mp_sgd_update      weight, grad, weight32           SGD on the float32 master
mp_sgd_mom_update  weight, grad, mom, weight32      SGD+momentum on the master
=================  ===============================  ==============================

``nag_mom_update`` computes the momentum from the updated weight, which is
what MXNet 1.9.1 gives for the usual in-place call ``out=weight``; with a
separate ``out`` MXNet reads the old weight there (a difference of order
``lr^2 wd``).

Every param is rounded to float32 before use, as MXNet stores them (C++
``float`` fields), so float64 weights follow MXNet to the last bits.

The ops have no gradient (MXNet registers none): their backward writes
zeros where a gradient is requested.

Shapes: every input has the weight's shape; the output too. Types: the
weight's dtype for the output; the ``mp_`` ops keep ``weight32`` (and
``mom``) in float32 while ``weight``/``grad`` may be float16.

Source: MXNet 1.9.1 ``src/operator/optimizer_op.cc`` documentation.
"""
import numpy as np

from ..ops.params import Field, Params, REQUIRED, require_finite
from ..ops.registry import OpDef, register_op, shape_assign
from ..ndarray.ndarray import NDArray
from . import adam, adaptive, sgd

__all__ = ['UPDATE_OPS']


def _fields(extra):
    """A Params subclass with the common fields plus ``extra`` (name -> Field)."""
    attrs = dict(
        lr=Field(float, REQUIRED, 'Learning rate.'),
        wd=Field(float, 0.0, 'Weight decay (L2 penalty coefficient).'),
        rescale_grad=Field(float, 1.0, 'Multiplies the raw gradient.'),
        clip_gradient=Field(float, -1.0, 'Clip the rescaled gradient to [-c, c]; '
                                         '<= 0 turns clipping off.'),
    )
    attrs.update(extra)
    if 'clip_grad' in extra:        # ftml_update names it clip_grad (MXNet FTMLParam)
        del attrs['clip_gradient']
    attrs['_ignored'] = ('lazy_update',)

    def validate(self):
        require_finite(self, *self._fields)
    attrs['validate'] = validate
    return attrs


_MOM = {'momentum': Field(float, 0.0, 'Decay rate of the momentum.')}
_EPS = Field(float, 1e-8, 'Small constant for numerical stability.')
_CLIPW = Field(float, -1.0, 'Clip weights to [-c, c]; <= 0 turns clipping off.')

#: name -> (fused update, state input names, extra params, named hp builder, multi-precision)
UPDATE_OPS = {
    'sgd_update': (sgd._SGD, [], {}, lambda p: {}, False),
    'sgd_mom_update': (sgd._SGD_MOM, ['mom'], _MOM, lambda p: dict(momentum=p.momentum), False),
    'nag_mom_update': (sgd._NAG_MOM, ['mom'], _MOM, lambda p: dict(momentum=p.momentum), False),
    'adam_update': (adam._ADAM, ['mean', 'var'], {
        'beta1': Field(float, 0.9, 'Decay rate of the first moment.'),
        'beta2': Field(float, 0.999, 'Decay rate of the second moment.'),
        'epsilon': _EPS},
        lambda p: dict(beta1=p.beta1, beta2=p.beta2, epsilon=p.epsilon), False),
    'rmsprop_update': (adaptive._RMSPROP, ['n'], {
        'gamma1': Field(float, 0.95, 'Decay rate of the squared-gradient average.'),
        'epsilon': _EPS, 'clip_weights': _CLIPW},
        lambda p: dict(gamma1=p.gamma1, gamma2=0.0, epsilon=p.epsilon,
                       clip_weights=p.clip_weights), False),
    'rmspropalex_update': (adaptive._RMSPROP_C, ['n', 'g', 'delta'], {
        'gamma1': Field(float, 0.95, 'Decay rate of the gradient averages.'),
        'gamma2': Field(float, 0.9, 'Decay rate of the step (momentum).'),
        'epsilon': _EPS, 'clip_weights': _CLIPW},
        lambda p: dict(gamma1=p.gamma1, gamma2=p.gamma2, epsilon=p.epsilon,
                       clip_weights=p.clip_weights), False),
    'ftrl_update': (adaptive._FTRL, ['z', 'n'], {
        'lamda1': Field(float, 0.01, 'L1 regularization coefficient.'),
        'beta': Field(float, 1.0, 'Per-coordinate learning rate beta.')},
        lambda p: dict(lamda1=p.lamda1, beta=p.beta), False),
    'signsgd_update': (sgd._SIGNSGD, [], {}, lambda p: {}, False),
    'signum_update': (sgd._SIGNUM, ['mom'], dict(_MOM, wd_lh=Field(
        float, 0.0, 'Decoupled weight decay applied to the weight.')),
        lambda p: dict(momentum=p.momentum, wd_lh=p.wd_lh), False),
    'ftml_update': (adam._FTML, ['d', 'v', 'z'], {
        'beta1': Field(float, 0.6, 'Decay rate of the first moment.'),
        'beta2': Field(float, 0.999, 'Decay rate of the second moment.'),
        'epsilon': _EPS,
        't': Field(int, REQUIRED, 'Number of update steps so far, counting this one.'),
        'clip_grad': Field(float, -1.0, 'Clip the rescaled gradient to [-c, c]; '
                                        '< 0 turns clipping off.')},
        lambda p: dict(beta1=p.beta1, beta2=p.beta2, epsilon=p.epsilon,
                       c1=1.0 - p.beta1 ** p.t, c2=1.0 - p.beta2 ** p.t), False),
    'mp_sgd_update': (sgd._SGD, [], {}, lambda p: {}, True),
    'mp_sgd_mom_update': (sgd._SGD_MOM, ['mom'], _MOM, lambda p: dict(momentum=p.momentum),
                          True),
}


def _hp(p, extra):
    """The kernel's hyper-parameters by name, each rounded to float32 as MXNet stores them
    (C++ ``float`` fields)."""
    clip = p.clip_grad if 'clip_grad' in p._fields else p.clip_gradient
    vals = dict(lr=p.lr, wd=p.wd, rescale_grad=p.rescale_grad, clip_gradient=clip, **extra(p))
    return {k: np.float32(v) for k, v in vals.items()}


def _make(name, fused, states, fields, extra, mp):
    args = ['weight', 'grad'] + states + (['weight32'] if mp else [])

    def infer_shape(p, in_shapes, aux_shapes, out_shapes):
        ins = list(in_shapes)
        known = next((s for s in ins if s is not None), None)
        if known is not None:
            for i, n in enumerate(args):
                shape_assign(ins, i, known, n)
        return ins, [None if known is None else tuple(known)], list(aux_shapes)

    def infer_type(p, in_types, aux_types):
        w = in_types[0] if in_types[0] is not None else in_types[1]
        ins = list(in_types)
        if w is not None:
            ins[0] = ins[0] or w
            ins[1] = ins[1] or w
            for i in range(2, len(ins)):
                ins[i] = ins[i] or (np.dtype(np.float32) if mp else w)
        return ins, [w], []

    # One forward for every device: the arrays are wrapped as NDArrays and moved with
    # their device primitives; FusedUpdate dispatches the kernel (float16 on the host).
    def forward(ctx, p, inputs, outputs, aux):
        dev = ctx.device
        nds = [NDArray(a, dev) for a in inputs]
        out = NDArray(outputs[0], dev)
        if mp:
            w32 = nds[-1]
            g32 = NDArray._from_host(nds[1]._host().astype(w32.dtype), dev)
            fused(w32, g32, nds[2:-1], **_hp(p, extra))
            out._copy_from(w32)
            return
        out._copy_from(nds[0])
        fused(out, nds[1], nds[2:], **_hp(p, extra))

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        for g, r in zip(in_grads, req):
            if r == 'write':
                NDArray(g, ctx.device)._fill(0)

    params = type(name + 'Param', (Params,), _fields(
        {k: Field(f.kind, f.default, f.doc) for k, f in fields.items()}))
    params.__doc__ = 'Parameters of %s.' % name
    docs = {'weight': 'Weight (float16 for the mp_ ops).', 'grad': 'Gradient.',
            'mom': 'Momentum, updated in place.', 'mean': 'First moment, updated in place.',
            'var': 'Second moment, updated in place.', 'n': 'Squared-gradient state, in place.',
            'g': 'Gradient average, in place.', 'delta': 'Step state, in place.',
            'z': 'FTRL/FTML z state, in place.', 'd': 'FTML d state, in place.',
            'v': 'FTML second moment, in place.', 'weight32': 'float32 master weight, in place.'}
    register_op(OpDef(
        name=name, arguments=args, infer_shape=infer_shape, infer_type=infer_type,
        forward={'cpu': forward, 'gpu': forward},
        backward={'cpu': backward, 'gpu': backward}, params=params,
        float_only=True,
        doc='%s: one optimizer step; returns the new weight, states updated in place.\n\n%s'
            % (name, __doc__),
        input_docs={a: docs[a] for a in args}))


for _name, (_fused, _states, _extra, _hpf, _mp) in UPDATE_OPS.items():
    _make(_name, _fused, _states, _extra, _hpf, _mp)
