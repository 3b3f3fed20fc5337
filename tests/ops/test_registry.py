"""The operator registry checks itself, and every operator is covered by an OpCase test."""
import importlib
import os
import sys

import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import FFError
from ffnumba.ops import get_op, gpu_missing, list_ops, register_op, OpDef
from ffnumba.ops.params import Field, Params
from ffnumba.ops.registry import same_shape

HERE = os.path.dirname(os.path.abspath(__file__))

#: Operators without GPU kernels. Adding an op without them means adding it here.
KNOWN_GPU_MISSING = []

#: Operators tested by targeted tests instead of an OpCase table, and where.
NOT_OPCASE = {}


def _opcase_ops():
    """Ops named by OpCase subclasses in the test modules under tests/ops.

    Imports those modules (pytest has usually imported them already: same
    module names, as its default import mode uses) and walks the subclasses,
    so classes generated in loops count too.
    """
    from ffnumba.testing import OpCase
    for root, _, files in os.walk(HERE):
        for f in sorted(files):
            if f.startswith('test_') and f.endswith('.py') and f[:-3] not in sys.modules:
                if root not in sys.path:
                    sys.path.insert(0, root)
                importlib.import_module(f[:-3])
    found, todo = set(), list(OpCase.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.op is not None:
            found.add(get_op(cls.op).name)
    return found


def _real(names):
    """Leave out the ``_test_*`` ops that other test modules register for themselves."""
    return sorted(n for n in names if not n.startswith('_test_'))


def test_gpu_missing_list_is_honest():
    assert _real(gpu_missing()) == sorted(KNOWN_GPU_MISSING)


def test_every_operator_has_an_opcase_test():
    missing = sorted(set(_real(list_ops())) - _opcase_ops() - set(NOT_OPCASE))
    assert not missing, 'operators without an OpCase test: %s' % missing


def test_every_operator_documents_itself():
    for name in _real(list_ops()):
        op = get_op(name)
        assert op.doc.strip(), name
        for fname, field in op.params._fields.items():
            assert field.doc, (name, fname)
        assert hasattr(ff.sym, name), name
        assert ff.sym.__dict__.get(name) is None or ff.sym.__dict__[name].__doc__, name


def _fwd(ctx, p, ins, outs, aux):
    outs[0][...] = ins[0]


def _bwd(ctx, p, og, ins, outs, ig, req, aux):
    pass


def test_registration_rejects_bad_declarations():
    class Undocumented(Params):
        k = Field(int, 1)
    with pytest.raises(FFError, match='no doc line'):
        register_op(OpDef(name='_test_reg_nodoc', arguments=['data'], infer_shape=same_shape,
                          forward={'cpu': _fwd}, backward={'cpu': _bwd}, params=Undocumented))
    with pytest.raises(FFError, match='forward for'):
        register_op(OpDef(name='_test_reg_nobwd', arguments=['data'], infer_shape=same_shape,
                          forward={'cpu': _fwd, 'gpu': _fwd}, backward={'cpu': _bwd}))
    with pytest.raises(FFError, match='already registered'):
        register_op(OpDef(name='FullyConnected', arguments=['data'], infer_shape=same_shape,
                          forward={'cpu': _fwd}, backward={'cpu': _bwd}))
    with pytest.raises(FFError, match='Unknown operator'):
        get_op('NoSuchOp')


def test_every_operator_has_the_one_infer_signature():
    """One ``infer_shape`` signature and one ``infer_type`` signature, no second form."""
    import inspect
    from ffnumba.ops.registry import INFER_SHAPE_ARGS, INFER_TYPE_ARGS
    for name in _real(list_ops()):
        op = get_op(name)
        for fn, want in ((op.infer_shape, INFER_SHAPE_ARGS), (op.infer_type, INFER_TYPE_ARGS)):
            params = inspect.signature(fn).parameters.values()
            got = tuple(q.name for q in params)
            assert got == want, (name, fn, got)
            assert all(q.default is q.empty and q.kind is q.POSITIONAL_OR_KEYWORD
                       for q in params), (name, fn)
    # the inference pass calls that one form and no longer inspects operators
    import ffnumba.symbol.infer as infer_mod
    assert 'inspect' not in open(infer_mod.__file__).read()


def test_registration_rejects_a_second_infer_shape_form():
    three = lambda p, in_shapes, aux_shapes: same_shape(p, in_shapes, aux_shapes, [None])
    optional = lambda p, in_shapes, aux_shapes, out_shapes=None: same_shape(
        p, in_shapes, aux_shapes, out_shapes)
    for i, fn in enumerate((three, optional)):
        with pytest.raises(FFError, match=r'infer_shape must take exactly \(p, in_shapes, '
                                          r'aux_shapes, out_shapes\)'):
            register_op(OpDef(name='_test_reg_sig%d' % i, arguments=['data'], infer_shape=fn,
                              forward={'cpu': _fwd}, backward={'cpu': _bwd}))
        assert '_test_reg_sig%d' % i not in list_ops()


def test_same_shape_infers_inputs_from_the_output():
    assert same_shape(None, [None, None], [], [(2, 3)]) == ([(2, 3), (2, 3)], [(2, 3)], [])
    assert same_shape(None, [(4,)], [], [None]) == ([(4,)], [(4,)], [])
    with pytest.raises(ff.base.ShapeError, match='input `arg1`'):
        same_shape(None, [(2, 3), (3, 2)], [], [None])
    # through a graph: the output shape of an elementwise op gives its input
    x = ff.sym.var('x')
    y = ff.sym.Activation(x, act_type='relu', name='act')
    z = ff.sym.FullyConnected(ff.sym.var('d'), num_hidden=5, name='fc')
    args, outs, _ = ff.sym.Group([y, z]).infer_shape_partial(d=(2, 7))
    assert outs == [(), (2, 5)]
    args, outs, _ = ff.sym.elemwise_add(y, z).infer_shape(d=(2, 7))
    assert dict(zip(ff.sym.elemwise_add(y, z).list_arguments(), args))['x'] == (2, 5)


def test_param_errors_name_op_field_and_value():
    data = ff.sym.var('data')
    with pytest.raises(ff.base.ParamError, match=r'FullyConnected: `num_hidden` must be .*'
                                                 r'Received: num_hidden=0'):
        ff.sym.FullyConnected(data, num_hidden=0)
    with pytest.raises(ff.base.ParamError, match='unknown parameter `num_hiden`'):
        ff.sym.FullyConnected(data, num_hiden=3)
    with pytest.raises(ff.base.ParamError, match='Activation: `act_type` must be one of'):
        ff.sym.Activation(data, act_type='swish')
    # strings from MXNet JSON parse to the same typed values
    a = get_op('Convolution').parse_params({'kernel': '(3, 3)', 'num_filter': '8', 'no_bias': 'True'})
    b = get_op('Convolution').parse_params({'kernel': (3, 3), 'num_filter': 8, 'no_bias': True})
    assert a == b and a.kernel == (3, 3) and a.no_bias is True


def _checked_by(test, cases='_all_cases'):
    """Ops with a collected OpCase whose generated ``test`` runs (on some of ``cases``)."""
    from ffnumba.testing import OpCase
    _opcase_ops()
    found, todo = set(), list(OpCase.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.op is not None and cls.__name__.startswith('Test') and \
                callable(getattr(cls, test)) and getattr(cls(), cases)():
            found.add(get_op(cls.op).name)
    return found


def _checked_reads():
    """Ops whose ``backward_reads`` some collected OpCase checks (a differentiable case)."""
    return _checked_by('test_backward_reads')


def test_every_backward_reads_declaration_is_checked():
    """Each op that declares what its backward reads (the training executor shares the rest)
    has an OpCase whose ``test_backward_reads`` runs its backward on garbage in the rest;
    ops whose gradient is identically zero, and BlockGrad, are exempt (no backward of
    theirs reads anything)."""
    from ffnumba._memory_plan import zero_gradient
    from ffnumba.symbol.graph import Node
    declared = [n for n in _real(list_ops())
                if get_op(n).backward_reads != ('inputs', 'outputs')]
    zero = set()
    for n in declared:
        op = get_op(n)
        try:
            node = Node(op, 'x', op.parse_params({}))
        except FFError:
            continue
        if zero_gradient(node) or not op.passes_gradient:    # no backward reads anything
            zero.add(n)
    missing = sorted(set(declared) - _checked_reads() - zero)
    assert not missing, 'backward_reads declared but never checked: %s' % missing


def test_every_zero_gradient_declaration_is_checked():
    """Each op that declares ``zero_gradient`` (the executor then never passes it head
    gradients) has an OpCase whose ``test_zero_gradient`` runs its backward with random head
    gradients and finds every input gradient zero; the declared set is MXNet's
    ``MakeZeroGradNodes`` ops that ffnumba registers."""
    declared = [n for n in _real(list_ops()) if get_op(n).zero_gradient is not False]
    checked = _checked_by('test_zero_gradient', '_zero_gradient_cases')
    missing = sorted(set(declared) - checked)
    assert not missing, 'zero_gradient declared but never checked: %s' % missing
    cmp = ['equal', 'not_equal', 'greater', 'greater_equal', 'lesser', 'lesser_equal']
    assert sorted(declared) == sorted(
        ['argmax', 'argmin', 'argmax_channel', 'argsort', 'topk', 'shape_array', 'size_array',
         'zeros_like', 'ones_like', 'one_hot', 'logical_not']
        + ['_' + c for c in cmp] + ['_%s_scalar' % c for c in cmp]
        + ['broadcast_' + c for c in cmp + ['logical_and', 'logical_or', 'logical_xor']])
    topk = get_op('topk')
    assert [topk.has_zero_gradient(topk.parse_params(dict(ret_typ=r)))
            for r in ('indices', 'mask', 'value', 'both')] == [True, True, False, False]


def test_zero_gradient_declaration_is_validated():
    kw = dict(arguments=['data'], infer_shape=same_shape, forward={'cpu': _fwd},
              backward={'cpu': _bwd})
    for i, bad in enumerate(('yes', 1, lambda: True, lambda p, q: True)):
        with pytest.raises(FFError, match='zero_gradient must be a bool or a callable'):
            register_op(OpDef(name='_test_reg_zg%d' % i, zero_gradient=bad, **kw))
    with pytest.raises(FFError, match='declares zero_gradient but is a loss op'):
        register_op(OpDef(name='_test_reg_zgloss', zero_gradient=True, is_loss=True, **kw))
    with pytest.raises(FFError, match='passes no gradient'):
        register_op(OpDef(name='_test_reg_zgblock', zero_gradient=True, passes_gradient=False,
                          **kw))
    assert not [n for n in list_ops() if n.startswith('_test_reg_zg')]
