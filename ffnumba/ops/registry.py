"""The operator registry: one :class:`OpDef` per operator declares everything.

An op-family file builds an ``OpDef`` and calls :func:`register_op` once per
operator. The declaration holds the MXNet name and aliases, the typed params,
the argument / auxiliary-state / output names, shape and type inference, and
forward/backward per device kind. ``ff.sym.<Op>`` is generated from it
(signature and docstring), so the docs cannot drift from the code.

Compute contract
----------------
``forward(ctx, p, inputs, outputs, aux)``
    ``inputs``: arrays of the arguments, in ``arguments(p)`` order;
    ``outputs``: preallocated arrays to fill, in ``outputs(p)`` order;
    ``aux``: auxiliary-state arrays (may be updated in place in training).
``backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux)``
    ``out_grads``: head gradients, one per output (a loss op ignores them and
    may receive ``None``); ``in_grads[i]`` is the array to write or add into,
    ``None`` where ``req[i] == 'null'``; ``req[i]`` is ``'write'``, ``'add'``
    or ``'null'``.

On the CPU the arrays are C-contiguous ``numpy.ndarray``; on a GPU they are
numba ``DeviceNDArray``. ``ctx`` is an :class:`OpContext`.

Shape contract
--------------
``infer_shape(p, in_shapes, aux_shapes, out_shapes) -> (in_shapes, out_shapes, aux_shapes)``,
one signature for every operator: ``in_shapes`` / ``aux_shapes`` hold one
shape per argument / auxiliary state and ``out_shapes`` one per visible
output, ``None`` where unknown (the imperative ``ff.nd`` path passes
``[None] * n``). It fills what it can in both directions (a FullyConnected
weight from its data, an elementwise input from its output; an op that
infers nothing from its outputs ignores ``out_shapes``) and raises
:class:`~ffnumba.base.ShapeError` with a plain message on a conflict; the
inference pass prefixes ``Error in operator <node>:``.
``tests/ops/test_registry.py`` keeps every operator on this signature.

``infer_type(p, in_types, aux_types) -> (in_types, out_types, aux_types)``
likewise, with numpy dtypes.
"""
import inspect
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..base import FFError, ShapeError, DTypeError
from .params import NoParams
from ._empty import guard_empty

__all__ = ['OpDef', 'OpContext', 'register_op', 'get_op', 'list_ops', 'gpu_missing',
           'assign', 'same_shape', 'same_type', 'shape_assign', 'FLOAT_TYPES',
           'INFER_SHAPE_ARGS', 'INFER_TYPE_ARGS']

#: The one signature of ``OpDef.infer_shape`` (see "Shape contract" above).
INFER_SHAPE_ARGS = ('p', 'in_shapes', 'aux_shapes', 'out_shapes')
#: The one signature of ``OpDef.infer_type``.
INFER_TYPE_ARGS = ('p', 'in_types', 'aux_types')

_OPS = {}
_ALIASES = {}
#: Upper bound of the count params (``num_args``, ``num_outputs``) of ops that set none.
MAX_VARIADIC_INPUTS = 100000


class OpContext:
    """What a kernel call may use besides its arrays.

    Attributes
    ----------
    is_train : bool
        Training mode (Dropout masks, BatchNorm batch statistics).
    device : Context
        Where the arrays live.
    state : dict
        Per-node scratch kept across forward and backward (a Dropout mask,
        BatchNorm's batch mean). Owned by one executor.
    rng : numpy.random.Generator
        This executor's generator (seeded through ``ff.random.seed``).
    node_name : str
        Name of the graph node, for error messages.
    """

    __slots__ = ('is_train', 'device', 'state', 'rng', 'node_name')

    def __init__(self, is_train, device, state, rng, node_name=''):
        self.is_train = is_train
        self.device = device
        self.state = state
        self.rng = rng
        self.node_name = node_name


def _as_fn(x):
    if callable(x):
        return x
    val = list(x)
    return lambda p: list(val)


@dataclass
class OpDef:
    """Declaration of one operator.

    Parameters
    ----------
    name : str
        MXNet's operator name (``'FullyConnected'``).
    arguments : list of str or callable(p) -> list of str
        Input names (``['data', 'weight', 'bias']``); missing inputs become
        Variables named ``{node}_{arg}``.
    infer_shape : callable
        See the module docstring.
    forward, backward : dict
        ``{'cpu': fn, 'gpu': fn}``; a device with a forward must have a backward.
    params : Params subclass
        Typed parameters (default: none).
    aux : list or callable
        Auxiliary-state names (``['moving_mean', 'moving_var']``).
    outputs : list or callable
        Visible output names (default ``['output']``).
    num_hidden_outputs : int or callable
        Outputs MXNet counts but does not show (BatchNorm's mean and var);
        used for ``node_row_ptr`` in JSON.
    infer_type : callable, optional
        ``(p, in_types, aux_types) -> (in, out, aux)`` with numpy dtypes or None;
        default: every input, output and aux shares one dtype.
    aliases : tuple of str
        Other names (``'split'`` for ``SliceChannel``).
    hint : str, optional
        Auto-name prefix (default: the lower-cased name).
    is_loss : bool
        A loss head: backward ignores head gradients, and ``backward()``
        without ``out_grads`` is allowed.
    variadic : str, optional
        Name of the count param of an op taking ``*data`` (Concat: ``'num_args'``).
    doc : str
        The docstring body (math, shapes, source).
    input_docs : dict
        One line per argument name for the generated docstring.
    float_only : bool or tuple of str, default False
        Inputs that must have a floating dtype (float16/32/64): ``True`` for
        every argument and auxiliary state, or a tuple of names. Type
        inference then raises :class:`~ffnumba.base.DTypeError` naming the
        input and its dtype, instead of letting an int or bool array reach
        float kernels (a numba typing error or silently truncated numbers).
    backward_reads : tuple of str or callable(p) -> tuple, default ('inputs', 'outputs')
        Which forward values the backward reads: ``'inputs'`` (every argument),
        ``'outputs'`` (every visible output), or single argument and output
        names (``('label', 'output')``). The training executor keeps those of
        every node whose backward runs and shares the buffers of the rest
        (``()``: the backward needs neither, e.g. a copy). An op built on
        ``templates.make_unary`` declares it from its ``grad_uses``. Each
        declaration is checked by ``OpCase.test_backward_reads``.
    passes_gradient : bool, default True
        False for an op whose inputs get no gradient (``BlockGrad``): the
        executor runs no backward through it, nor above it on its account.
    zero_gradient : bool or callable(p) -> bool, default False
        True for an op whose gradient is zero whatever the head gradient
        (MXNet registers ``MakeZeroGradNodes`` for it: ``argmax``, the
        comparisons, ``zeros_like``; ``topk`` only for ``ret_typ`` ``'indices'``
        or ``'mask'``, hence the callable of the params). Its backward never
        reads its head gradient, so ``Executor.backward`` ignores whatever is
        passed for such a head (any shape) or its absence. Read it through
        :meth:`has_zero_gradient`; each declaration is checked by
        ``OpCase.test_zero_gradient`` (backward with random head gradients
        writes zeros).
    """

    name: str
    arguments: object
    infer_shape: Callable
    forward: dict
    backward: dict
    params: type = NoParams
    aux: object = ()
    outputs: object = ('output',)
    num_hidden_outputs: object = 0
    infer_type: Optional[Callable] = None
    aliases: tuple = ()
    hint: Optional[str] = None
    is_loss: bool = False
    variadic: Optional[str] = None
    doc: str = ''
    input_docs: dict = field(default_factory=dict)
    float_only: object = False
    backward_reads: tuple = ('inputs', 'outputs')
    passes_gradient: bool = True
    zero_gradient: object = False

    def __post_init__(self):
        self.list_arguments = _as_fn(self.arguments)
        self.list_aux = _as_fn(self.aux)
        self.list_outputs = _as_fn(self.outputs)
        self.hidden_outputs = (self.num_hidden_outputs if callable(self.num_hidden_outputs)
                               else (lambda p, n=self.num_hidden_outputs: n))
        if self.infer_type is None:
            self.infer_type = same_type
        if self.float_only:
            self.infer_type = _float_checked(self, self.infer_type)
        if self.hint is None:
            self.hint = self.name.lower()
        if self.backward_reads == ('inputs', 'outputs'):
            # a kernel template that knows what it reads (templates.make_unary) says so
            self.backward_reads = getattr(self.backward.get('cpu'), 'backward_reads',
                                          self.backward_reads)

    def has_zero_gradient(self, p):
        """True when, with params ``p``, the gradient is zero whatever the head gradient
        (see ``zero_gradient``)."""
        zg = self.zero_gradient
        return bool(zg(p)) if callable(zg) else zg

    def parse_params(self, kwargs):
        """Typed params from user kwargs or JSON attr strings."""
        return self.params.parse(self.name, kwargs)

    def compute(self, device_type):
        """``(forward, backward)`` for a device kind, or raise FFError."""
        if device_type in ('cpu_pinned', 'cpu_shared'):
            device_type = 'cpu'
        if device_type not in self.forward:
            raise FFError('Operator %s has no %s implementation yet (see '
                          'ffnumba.ops.registry.gpu_missing())' % (self.name, device_type))
        guarded = self.__dict__.setdefault('_guarded', {})
        if device_type not in guarded:     # empty outputs never reach a kernel (ops._empty)
            guarded[device_type] = guard_empty(self.forward[device_type],
                                               self.backward[device_type])
        return guarded[device_type]


#: dtypes a ``float_only`` input accepts.
FLOAT_TYPES = ('float16', 'float32', 'float64')


def _float_checked(op, infer_type):
    """Wrap ``infer_type`` so ``op.float_only`` inputs must have a float dtype."""
    def infer(p, in_types, aux_types):
        names = list(op.list_arguments(p)) + list(op.list_aux(p))
        wanted = names if op.float_only is True else list(op.float_only)
        res = infer_type(p, in_types, aux_types)
        for name, t in zip(names, list(res[0]) + list(res[2])):
            if name in wanted and t is not None and np.dtype(t).name not in FLOAT_TYPES:
                raise DTypeError('%s: `%s` must have a float dtype (%s). Received: %s dtype %s'
                                 % (op.name, name, ', '.join(FLOAT_TYPES), name,
                                    np.dtype(t).name))
        return res
    return infer


def _positional_arity(fn):
    """How many positional parameters ``fn`` takes, or None if one has a default or it
    takes ``*args`` / ``**kwargs`` (then two call forms would fit it)."""
    code = getattr(fn, '__code__', None)
    if inspect.isfunction(fn) and not hasattr(fn, '__wrapped__'):
        # a plain function: read its code object (inspect.signature, at import, for
        # every operator, took a noticeable share of `import ffnumba`)
        if (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
                or code.co_kwonlyargcount or fn.__defaults__):
            return None
        return code.co_argcount
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(q.kind not in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
           or q.default is not q.empty for q in params):
        return None
    return len(params)


def register_op(op):
    """Add ``op`` to the registry, checking the declaration.

    Raises
    ------
    FFError
        On a duplicate name, a param without a doc line, a device with a
        forward but no backward, or an ``infer_shape`` that does not take
        exactly the four positional parameters of :data:`INFER_SHAPE_ARGS`,
        a ``zero_gradient`` that is neither a bool nor a callable of one
        parameter ``(p)``, or one declared on a loss op or an op that passes
        no gradient (those make, or stop, their gradient themselves).
    """
    names = (op.name,) + tuple(op.aliases)
    for n in names:
        if n in _OPS or n in _ALIASES:
            raise FFError('register_op: operator name %r is already registered' % n)
    for fname, f in op.params._fields.items():
        if not f.doc:
            raise FFError('register_op: %s param `%s` has no doc line' % (op.name, fname))
    if set(op.forward) != set(op.backward):
        raise FFError('register_op: %s declares forward for %s but backward for %s'
                      % (op.name, sorted(op.forward), sorted(op.backward)))
    if 'cpu' not in op.forward:
        raise FFError('register_op: %s has no CPU implementation' % op.name)
    if _positional_arity(op.infer_shape) != len(INFER_SHAPE_ARGS):
        raise FFError('register_op: %s infer_shape must take exactly (%s), no defaults. '
                      'Received: %s' % (op.name, ', '.join(INFER_SHAPE_ARGS), op.infer_shape))
    if not callable(op.backward_reads):
        known = {'inputs', 'outputs'}
        if not callable(op.arguments):
            known.update(op.arguments)
        if not callable(op.outputs):
            known.update(op.outputs)
        if isinstance(op.backward_reads, str) or not all(
                isinstance(r, str) for r in op.backward_reads) or (
                not callable(op.arguments) and not callable(op.outputs)
                and not set(op.backward_reads) <= known):
            raise FFError("register_op: %s backward_reads must name 'inputs', 'outputs' or "
                          'arguments and outputs of the op (%s). Received: %r'
                          % (op.name, sorted(known), op.backward_reads))
    zg = op.zero_gradient
    if not (isinstance(zg, bool) or (callable(zg) and _positional_arity(zg) == 1)):
        raise FFError('register_op: %s zero_gradient must be a bool or a callable (p) -> bool. '
                      'Received: %r' % (op.name, zg))
    if zg is not False and (op.is_loss or not op.passes_gradient):
        raise FFError('register_op: %s declares zero_gradient but is a loss op or passes no '
                      'gradient (is_loss=%r, passes_gradient=%r)'
                      % (op.name, op.is_loss, op.passes_gradient))
    for cname in {op.variadic, 'num_args', 'num_outputs'} - {None}:
        count = op.params._fields.get(cname)
        if count is not None and count.kind is int and count.high is None:
            # a name per input/output: num_args=10**12 would never return (MXNet makes a
            # Variable for each input not given)
            count.high = MAX_VARIADIC_INPUTS
    _OPS[op.name] = op
    for a in op.aliases:
        _ALIASES[a] = op.name
    return op


def get_op(name):
    """The OpDef registered under ``name`` (or an alias).

    Raises
    ------
    FFError
        If no such operator exists.
    """
    name = _ALIASES.get(name, name)
    try:
        return _OPS[name]
    except KeyError:
        raise FFError('Unknown operator %r' % name) from None


def list_ops(include_aliases=False):
    """Names of every registered operator, sorted."""
    names = list(_OPS)
    if include_aliases:
        names += list(_ALIASES)
    return sorted(names)


def gpu_missing():
    """Operators that have no GPU kernels yet (a test keeps this list honest)."""
    return sorted(n for n, op in _OPS.items() if 'gpu' not in op.forward)


# --------------------------------------------------------------------- helpers

def assign(dst, src, req):
    """Write or accumulate ``src`` into ``dst`` by ``req`` (numpy arrays).

    Parameters
    ----------
    dst : numpy.ndarray
        The gradient or output array, written in place.
    src : array_like
        Broadcastable to ``dst.shape``.
    req : {'write', 'add', 'null'}
        ``'null'`` leaves ``dst`` alone.
    """
    if req == 'write':
        dst[...] = src
    elif req == 'add':
        dst += src


def shape_assign(shapes, i, shape, what):
    """Set ``shapes[i]`` to ``shape``, or check it against a known value.

    Parameters
    ----------
    shapes : list of tuple or None
        Shapes being inferred; ``shapes[i]`` may be set in place.
    i : int
        Index into ``shapes``.
    shape : tuple of int or None
        The inferred shape (``None``: nothing to do).
    what : str
        The input's name, for the message.

    Raises
    ------
    ShapeError
        ``Shape inconsistent for input `what`, Provided = [...], inferred
        shape=(...)`` when ``shapes[i]`` is known and differs (MXNet's wording;
        the inference pass prefixes ``Error in operator <node>:``).
    """
    shape = None if shape is None else tuple(int(d) for d in shape)
    if shape is None:
        return
    if shapes[i] is None:
        shapes[i] = shape
    elif tuple(shapes[i]) != shape:
        raise ShapeError('Shape inconsistent for input `%s`, Provided = %s, inferred shape=%s'
                         % (what, list(shapes[i]), shape))


def same_shape(p, in_shapes, aux_shapes, out_shapes):
    """``infer_shape`` of ops whose inputs and single output share one shape.

    Parameters
    ----------
    p : Params
        Unused.
    in_shapes, aux_shapes, out_shapes : list of tuple or None
        See the module docstring; the first known input gives every other
        input and the output, or, with no input known, the known output gives
        them (elementwise: the output's shape is the inputs').

    Returns
    -------
    (in_shapes, [out_shape], aux_shapes)

    Raises
    ------
    ShapeError
        When two known inputs differ (see :func:`shape_assign`; a single input
        is named ``data``, several ``arg0``, ``arg1``, ... as ``add_n``'s).
    """
    ins = list(in_shapes)
    known = next((s for s in ins if s is not None), None)
    if known is None and out_shapes and out_shapes[0] is not None:
        known = tuple(out_shapes[0])
    if known is not None:
        for i in range(len(ins)):
            shape_assign(ins, i, known, 'data' if len(ins) == 1 else 'arg%d' % i)
    return ins, [known], list(aux_shapes)


def same_type(p, in_types, aux_types):
    """Type inference where every input, output and aux share one dtype.

    Returns
    -------
    (in_types, [out_type], aux_types)
        Unknown entries filled with the first known dtype.

    Raises
    ------
    DTypeError
        When two known dtypes differ.
    """
    known = next((t for t in list(in_types) + list(aux_types) if t is not None), None)
    if known is None:
        return list(in_types), [None], list(aux_types)
    for t in list(in_types) + list(aux_types):
        if t is not None and t != known:
            raise DTypeError('Type inconsistent, Provided = %s, inferred type = %s' % (t, known))
    n_out = 1
    return [known] * len(in_types), [known] * n_out, [known] * len(aux_types)
