"""``OpCase``: a table-driven operator test that generates the standard checks.

A test module subclasses :class:`OpCase`, names the op, gives a table of
params and a table of input shapes, and writes a numpy reference. The base
class then provides, per case:

``test_infer_shape``
    ``infer_shape`` from the given shapes equals the shapes the forward
    really produces, and the reference's shapes.
``test_forward``
    Executor outputs equal the reference, in float32 and float64.
``test_gradient``
    The float64 directional gradient check (``check_numeric_gradient``) over
    cases drawn by hypothesis from :meth:`cases`.
``test_grad_req_add``
    With ``grad_req='add'`` two backward passes add twice the gradient to
    the initial values.
``test_backward_reads`` (ops that declare ``OpDef.backward_reads``)
    Backward with the inputs and outputs the declaration calls unread
    overwritten by garbage gives the same gradients, for every table case.
``test_zero_gradient`` (ops that declare ``OpDef.zero_gradient``)
    For every table case whose params the declaration covers, the op's
    backward given random head gradients writes zeros (``'write'``) and
    adds nothing (``'add'``) to every input gradient.
``test_gpu_consistency`` (marked ``gpu``; only for ops with GPU kernels)
    The GPU kernels agree with the CPU ones (run under numba's CUDA
    simulator where there is no GPU).

Example
-------
>>> class TestFullyConnected(OpCase):                       # doctest: +SKIP
...     op = 'FullyConnected'
...     params = [dict(num_hidden=3)]
...     shapes = [dict(data=(2, 5))]
...     def reference(self, p, data, weight, bias):
...         return [data @ weight.T + bias]
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ..context import cpu, gpu
from ..ops.registry import get_op
from .gradcheck import (assert_almost_equal, bind_numpy, check_numeric_gradient,
                        check_consistency)
from .reads import check_backward_reads, check_zero_gradient

__all__ = ['OpCase']


class OpCase:
    """Base class of table-driven operator tests (see the module docstring).

    Class attributes
    ----------------
    op : str
        Registry name of the operator.
    params : list of dict
        Param sets (Python values as a user passes them).
    shapes : list of dict
        Shapes of the inputs the user gives; other arguments are inferred.
    dtypes : tuple of str
        Dtypes of the forward test.
    rtol, atol : float
        Forward tolerance in float64 (float32 uses ``rtol32``/``atol32``).
    grad_rtol, grad_atol, numeric_eps : float
        Gradient-check tolerances and step.
    nondifferentiable : bool
        Skip gradient checks (ops whose gradient is zero or undefined get
        their own targeted tests instead).
    grad_nodes : list of str or None
        Arguments whose gradients are checked (default: every argument).
    is_train : bool
        Mode of forward in the gradient check.
    batch_inputs : tuple of str
        Inputs whose axis 0 is the batch axis.
    max_batch : int or None
        Largest batch size :meth:`cases` draws (None: keep the tables' shapes).
    """

    op = None
    params = [{}]
    shapes = []
    dtypes = ('float32', 'float64')
    rtol, atol = 1e-6, 1e-8
    rtol32, atol32 = 1e-4, 1e-5
    grad_rtol, grad_atol, numeric_eps = 1e-4, 1e-7, 1e-6
    nondifferentiable = False
    grad_nodes = None
    is_train = True
    #: Inputs whose axis 0 is the batch; ``cases()`` redraws it up to ``max_batch``.
    batch_inputs = ('data', 'label', 'lhs', 'rhs', 'condition', 'x', 'y')
    max_batch = 4

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.op is not None and 'gpu' not in get_op(cls.op).forward:
            cls.test_gpu_consistency = None   # nothing to compare: pytest skips non-callables
        if cls.op is not None and (cls.nondifferentiable
                                   or get_op(cls.op).backward_reads == ('inputs', 'outputs')):
            cls.test_backward_reads = None   # nothing declared (the default): nothing to check
        if cls.op is not None and (get_op(cls.op).zero_gradient is False
                                   or not cls()._zero_gradient_cases()):
            # nothing declared, or no table case has params it covers (topk, ret_typ='value')
            cls.test_zero_gradient = None
        elif cls.op is not None and cls.test_zero_gradient is None:     # a parent's op had none
            cls.test_zero_gradient = OpCase.test_zero_gradient
        if cls.nondifferentiable:
            cls.test_gradient = None
        elif 'test_gradient' not in vars(cls):
            # A fresh hypothesis wrapper per subclass: hypothesis refuses one @given
            # function run from several test classes.
            cls.test_gradient = given(data=st.data())(OpCase._gradient_case)

    # ------------------------------------------------------------ overridable
    def cases(self):
        """A hypothesis strategy of ``(params, shapes)``.

        Default: a case of the tables' product, with the batch size (axis 0 of
        every input named in ``batch_inputs``) redrawn from 1 to ``max_batch``,
        so gradient checks cover shapes beyond the table. Set
        ``max_batch = None`` where axis 0 is not free.
        """
        base = st.sampled_from(self._all_cases())
        if not self.max_batch:
            return base

        def resize(case, n):
            p, shapes = case
            return p, {k: ((n,) + tuple(v[1:]) if k in self.batch_inputs and len(v) else v)
                       for k, v in shapes.items()}
        return st.tuples(base, st.integers(1, self.max_batch)).map(lambda t: resize(*t))

    def make_symbol(self, p):
        """The symbol under test: the op applied to Variables named after its arguments."""
        import ffnumba.symbol as sym
        opdef = get_op(self.op)
        names = opdef.list_arguments(opdef.parse_params(p))
        fn = getattr(sym, self.op)
        return fn(*[sym.Variable(n) for n in names], name='op', **p)

    def inputs(self, rng, p, shapes):
        """Input values by argument name (float64); default uniform(-1, 1)."""
        return {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}

    def aux_inputs(self, rng, p, shapes):
        """Auxiliary-state values by name (default: zeros for ``*mean``, ones else)."""
        return {n: (np.zeros(s) if n.endswith('mean') else np.ones(s))
                for n, s in shapes.items()}

    def reference(self, p, **inputs):
        """Numpy forward: float64 arrays by argument name in, list of outputs out."""
        raise NotImplementedError('%s must define reference()' % type(self).__name__)

    def loss(self, p, outputs, inputs):
        """For loss heads: the scalar their backward differentiates (None: not a loss)."""
        return None

    # ------------------------------------------------------------ machinery
    def _setup(self, p, given_shapes, seed=0):
        s = self.make_symbol(p)
        arg_shapes, out_shapes, aux_shapes = s.infer_shape(**given_shapes)
        assert arg_shapes is not None, 'infer_shape could not complete from %s' % given_shapes
        rng = np.random.default_rng(seed)
        arg = dict(zip(s.list_arguments(), arg_shapes))
        aux = dict(zip(s.list_auxiliary_states(), aux_shapes))
        loc = self.inputs(rng, p, arg)
        for n in arg:
            loc.setdefault(n, rng.uniform(-1, 1, arg[n]))
        auxv = self.aux_inputs(rng, p, aux)
        return s, loc, auxv, out_shapes

    def _all_cases(self):
        return list(itertools.product(self.params, self.shapes))

    def _loss_fn(self, p):
        if self.loss(p, None, None) is None:
            return None
        return lambda outs, vals: self.loss(p, outs, vals)

    # ------------------------------------------------------------ generated tests
    def test_infer_shape(self):
        for p, shapes in self._all_cases():
            s, loc, aux, out_shapes = self._setup(p, shapes)
            exe = bind_numpy(s, loc, aux, grad_req='null')
            exe.forward(is_train=False)
            got = [o.shape for o in exe.outputs]
            assert got == [tuple(x) for x in out_shapes], (p, shapes, got, out_shapes)

    def test_forward(self):
        for p, shapes in self._all_cases():
            s, loc, aux, _ = self._setup(p, shapes)
            expected = self.reference(p, **loc)
            for dt in self.dtypes:
                exe = bind_numpy(s, loc, aux, grad_req='null', dtype=dt)
                exe.forward(is_train=False)
                rtol, atol = (self.rtol, self.atol) if dt == 'float64' else (self.rtol32, self.atol32)
                assert len(exe.outputs) >= len(expected)
                for i, (o, e) in enumerate(zip(exe.outputs, expected)):
                    assert o.dtype == np.dtype(dt), (o.dtype, dt)
                    assert_almost_equal(o.asnumpy(), e, rtol, atol,
                                        names=('%s output %d (%s, %s)' % (self.op, i, p, dt),
                                               'reference'))

    def _gradient_case(self, data):
        p, shapes = data.draw(self.cases())
        s, loc, aux, _ = self._setup(p, shapes, seed=data.draw(st.integers(0, 2 ** 16)))
        check_numeric_gradient(s, loc, aux, numeric_eps=self.numeric_eps, rtol=self.grad_rtol,
                               atol=self.grad_atol, grad_nodes=self.grad_nodes,
                               loss=self._loss_fn(p), is_train=self.is_train)

    test_gradient = None   # set per subclass in __init_subclass__

    def test_grad_req_add(self):
        for p, shapes in self._all_cases()[:2]:
            s, loc, aux, _ = self._setup(p, shapes)
            nodes = self.grad_nodes or s.list_arguments()
            rng = np.random.default_rng(1)
            heads = None
            exe = bind_numpy(s, loc, aux, grad_req={n: 'write' for n in nodes}, dtype='float64')
            exe.forward(is_train=self.is_train)
            if self._loss_fn(p) is None:
                heads = [rng.standard_normal(o.shape) for o in exe.outputs]
            from .. import ndarray as nd
            hg = None if heads is None else [nd.array(h, dtype='float64') for h in heads]
            exe.backward(hg)
            once = {n: exe.grad_dict[n].asnumpy() for n in nodes}
            init = {n: rng.standard_normal(once[n].shape) for n in nodes}
            exe2 = bind_numpy(s, loc, aux, grad_req={n: 'add' for n in nodes}, dtype='float64',
                              grads=init)
            for _ in range(2):
                exe2.forward(is_train=self.is_train)
                exe2.backward(hg)
            for n in nodes:
                assert_almost_equal(exe2.grad_dict[n].asnumpy(), init[n] + 2 * once[n], 1e-6, 1e-8,
                                    names=('grad_req=add grad of ' + n, 'init + 2 * grad'))

    def test_backward_reads(self):
        """The op's ``backward_reads`` is true: garbage in what it calls unread changes no
        gradient (the training executor shares those buffers; see :mod:`ffnumba.testing.reads`)."""
        for p, shapes in self._all_cases():
            s, loc, aux, _ = self._setup(p, shapes)
            check_backward_reads(s, loc, aux, op_name=get_op(self.op).name,
                                 is_train=self.is_train, grad_nodes=self.grad_nodes,
                                 head_grads=self._loss_fn(p) is None)

    def _zero_gradient_cases(self):
        """The table cases whose params ``OpDef.zero_gradient`` covers."""
        opdef = get_op(self.op)
        return [(p, shapes) for p, shapes in self._all_cases()
                if opdef.has_zero_gradient(opdef.parse_params(p))]

    def test_zero_gradient(self):
        """The op's ``zero_gradient`` is true: random head gradients give zero input
        gradients (see :func:`ffnumba.testing.reads.check_zero_gradient`)."""
        for p, shapes in self._zero_gradient_cases():
            s, loc, aux, _ = self._setup(p, shapes)
            check_zero_gradient(s, loc, aux, op_name=self.op, is_train=self.is_train,
                                grad_nodes=self.grad_nodes)

    @pytest.mark.gpu
    def test_gpu_consistency(self):
        for p, shapes in self._all_cases()[:2]:
            s, loc, aux, _ = self._setup(p, shapes)
            check_consistency(s, [cpu(0), gpu(0)], loc, aux, is_train=False)
