"""Executor: a symbol bound to arrays on one context (MXNet ``mx.executor``).

Binding numbers the graph, infers every shape and dtype, plans memory (values
a running backward reads keep their buffer, the rest share, and intermediate
gradients share by liveness; see :mod:`ffnumba._memory_plan`), and
precomputes for each node the lists of arrays its kernels receive.
``forward`` is then a tight loop of ``fwd(ctx, params, inputs, outputs, aux)``
calls and ``backward`` a loop over the nodes in reverse order.

Gradient accumulation: the first contribution to an entry's gradient is
written (``req='write'``), later ones are added (``'add'``), which sums the
gradients of an output consumed twice. An argument's first contribution uses
the user's ``grad_req``. A loss head (``OpDef.is_loss``) ignores head
gradients; a non-loss head needs ``out_grads``.

One executor may run in one thread while other executors run in others: it
holds no global mutable state (each node has its own ``OpContext`` and the
executor its own random generator from ``ff.random.spawn()``).

:func:`simple_bind` takes its arrays (and the shapes inferred for them) from
:func:`ffnumba._executor_bind.allocate`, which sits below this module.
"""
import time

import numpy as np

from ._executor_fuse import find_chains, fused_plan, in_place, lives_until
from ._executor_branches import branches_enabled, cut_nodes, region_lives
from ._executor_run import CallPlan
from ._executor_train_fuse import train_plans
from ._executor_bind import (ArgumentError, allocate, norm_grad_req, report, _arrays, _copy_into,
                             _host_values, _reraise)
from ._memory_plan import (describe, plan_gradients, plan_memory, sharing_enabled,
                           _view_of, _zeros)
from .base import FFError, ShapeError, ParamError
from .context import Context, check_device
from .ndarray._device import host_compute
from .ndarray.ndarray import NDArray
from .ops.registry import OpContext
from . import _compile_ahead, compile_notice
from . import random as _random
from .symbol import infer as _infer

__all__ = ['Executor', 'simple_bind', 'ArgumentError']

_HEAD_MSG = ('Because the last operator is not Loss function, head_gradient is required when '
             'calling backward. If you are attempting to minimize the output as an objective, '
             'please modify your network and pass it through the make_loss symbol.')


class _Rec:
    """Precomputed call of one operator node."""

    __slots__ = ('nid', 'name', 'fwd', 'bwd', 'p', 'ctx', 'ins', 'outs', 'aux', 'ograds',
                 'igrads', 'reqs', 'post', 'out_names', 'ahead')


class Executor:
    """A symbol bound to arrays on one context.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
    args : list or dict of NDArray
        Argument arrays (``list_arguments()`` order, or by name). Owned by the caller.
    args_grad : list or dict of NDArray, optional
        Gradient arrays; ``None`` means no gradients. A dict may omit names.
    grad_req : str, list or dict, default 'write'
        ``'write'``, ``'add'`` or ``'null'`` for all, per argument in order,
        or by name (missing names are ``'null'``).
    aux_states : list or dict of NDArray, optional
        Required when the symbol has auxiliary states.
    shared_exec : Executor, optional
        Accepted for MXNet compatibility (memory pools are not shared).

    Raises
    ------
    FFError
        For a GPU context without CUDA, arrays on another device, wrong
        counts, or shapes that do not infer.
    """

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req='write', aux_states=None,
                 shared_exec=None, _inferred=None, _reshaped=None):
        ctx = Context(ctx) if not isinstance(ctx, Context) else ctx
        check_device(ctx)
        self._symbol = symbol
        self._ctx = ctx
        view = symbol._view()
        view.check_unique_names()
        self._view = view
        arg_names = view.arg_names()
        aux_names = view.aux_names()
        self._arg_names, self._aux_names = arg_names, aux_names
        self._out_names = symbol.list_outputs()
        self.arg_arrays = _arrays(args, arg_names, 'args', False)
        grads = _arrays(args_grad, arg_names, 'args_grad', True)
        if aux_names and aux_states is None:
            raise ParamError('Length of aux_states does not match the number of auxiliary '
                             'states: the symbol has %s' % aux_names)
        self.aux_arrays = _arrays(aux_states, aux_names, 'aux_states', False) \
            if aux_names else []
        reqs = norm_grad_req(grad_req, arg_names)
        self._grad_req = {n: (reqs[n] if g is not None else 'null')
                          for n, g in zip(arg_names, grads)}
        # MXNet keeps the caller's gradient arrays even where grad_req is 'null'
        # (they are never written); only the requests decide what is computed.
        self.grad_arrays = grads
        for n, a in list(zip(arg_names, self.arg_arrays)) + list(zip(aux_names, self.aux_arrays)) \
                + [(n, g) for n, g in zip(arg_names, self.grad_arrays) if g is not None]:
            if not a._usable_on(ctx):
                raise FFError('bind: array %r is on %s but the executor is bound to %s'
                              % (n, a.context, ctx))
            if not a._is_contiguous():
                raise FFError('bind: array %r is not C-contiguous' % n)
        for n, a, g in zip(arg_names, self.arg_arrays, self.grad_arrays):
            if self._grad_req[n] != 'null' and g.shape != a.shape:
                raise ShapeError('bind: gradient of %r has shape %s, argument has %s'
                                 % (n, g.shape, a.shape))
        self._keep_all = False
        if _reshaped is not None:
            self._chains = _reshaped._chains
        self._setup(_inferred, None if _reshaped is None else _reshaped._nd_of)
        self._monitor, self._warm = None, set()   # warm: passes run once (compile_notice)
        self._ahead = None   # compile-ahead child of the cold start (_compile_ahead), or False
        self._first_forward_s, self._monitor_all, self._pairs_ran = 0.0, False, False

    # ------------------------------------------------------------ planning
    def _setup(self, inferred=None, shared=None):
        """Plan the graph. ``inferred``: per-entry ``(shapes, types)`` that
        :func:`simple_bind` already computed for exactly these arrays (the one
        shape pass before the first batch); None infers them from the arrays."""
        view, ctx = self._view, self._ctx
        if inferred is not None:
            shapes, types = inferred
        else:
            known_s = {n: a.shape for n, a in zip(self._arg_names, self.arg_arrays)}
            known_s.update({n: a.shape for n, a in zip(self._aux_names, self.aux_arrays)})
            known_t = {n: np.dtype(a.dtype) for n, a in zip(self._arg_names, self.arg_arrays)}
            known_t.update({n: np.dtype(a.dtype)
                            for n, a in zip(self._aux_names, self.aux_arrays)})
            shapes = _infer.infer_shapes(view, known_s, use_hints=False)
            types = _infer.infer_types(view, known_t, use_hints=False)
        missing = [view.entry_names()[e] for e in range(view.num_entries)
                   if shapes[e] is None or types[e] is None]
        if missing:
            raise ShapeError('bind: cannot infer the shape or type of %s' % missing[:10])
        self._shapes, self._types = shapes, types
        nd_of = [None] * view.num_entries
        for nid, a in zip(view.arg_nodes, self.arg_arrays):
            nd_of[view.entry_ptr[nid]] = a
        for nid, a in zip(view.aux_nodes, self.aux_arrays):
            nd_of[view.entry_ptr[nid]] = a
        gbuf = [None] * view.num_entries
        self._var_req = {}
        for nid, name, g in zip(view.arg_nodes, self._arg_names, self.grad_arrays):
            e = view.entry_ptr[nid]
            if self._grad_req[name] != 'null':
                gbuf[e] = g._data
                self._var_req[e] = self._grad_req[name]
        need, node_bwd, keep, unreached = plan_gradients(view, self._var_req, self._keep_all)
        # inference fusion (no gradients): a reshaped executor keeps its source's chains,
        # whose lifetimes its views of the source's buffers assume
        chains = getattr(self, '_chains', None)
        if chains is None:
            chains = [] if self._var_req else find_chains(view, shapes, types, ctx)
        self._chains = chains
        # the branch schedule (executors with gradients: an inference executor keeps its
        # fused and unfused forwards bitwise equal); no buffer freed inside one of its
        # regions is reused inside it
        branchy = bool(self._var_req) and host_compute(ctx) and branches_enabled()
        cuts = cut_nodes(view, shapes) if branchy else None
        lives = lives_until(view, chains)
        for e, nid in (region_lives(view, cuts) if branchy else {}).items():
            lives[e] = max(lives.get(e, nid), nid)
        self._plan, tmps = plan_memory(view, shapes, types, ctx, nd_of, keep, shared,
                                       (need, node_bwd, self._var_req, gbuf), sharing_enabled(),
                                       lives, cuts, in_place(view, chains, ctx, not self._var_req))
        self._nd_of = nd_of
        data = [a._data for a in nd_of]
        self.outputs = [nd_of[e] for e in view.heads]
        # a re-plan (set_monitor_callback) keeps the executor's random stream: installing a
        # monitor must not change Dropout's masks
        rng = getattr(self, '_rng', None) or _random.spawn()
        self._rng = rng
        # arguments behind BlockGrad only: their 'write' gradient is zero
        self._zero_grads = [gbuf[e] for e in unreached if self._var_req[e] == 'write']
        self._gbuf = gbuf
        count = [0] * view.num_entries

        def contrib_req(e):
            c = count[e]
            count[e] += 1
            if e in self._var_req:
                r = self._var_req[e]
                return 'add' if (r == 'add' or c > 0) else 'write'
            return 'write' if c == 0 else 'add'

        fwd_plan, rec_of = [], {}
        for nid, node in enumerate(view.nodes):
            if node.op is None:
                continue
            fwd, bwd = node.op.compute(ctx.device_type)
            r = _Rec()
            r.nid, r.name, r.fwd, r.bwd, r.p = nid, node.name, fwd, bwd, node.params
            r.ctx = OpContext(False, ctx, {}, rng, node.name)
            ents = view.in_entries[nid]
            r.ins = [data[e] for e in ents[:node.num_args]]
            r.aux = [data[e] for e in ents[node.num_args:]]
            outs = range(view.entry_ptr[nid], view.entry_ptr[nid + 1])
            r.outs = [data[e] for e in outs]
            r.out_names = node.output_names()
            fwd_plan.append(r)
            rec_of[nid] = r
        # the backward's contributions in the memory plan's order: the user's head
        # gradients first, then each running node (its repeated inputs through temporaries)
        self._head_plan, bwd_plan = [], []
        for step in self._plan.steps:
            if step[0] == 'head':
                _, k, e = step
                self._head_plan.append((k, e, contrib_req(e)))
                continue
            _, nid, ins = step
            r, node = rec_of[nid], view.nodes[nid]
            outs = range(view.entry_ptr[nid], view.entry_ptr[nid + 1])
            r.ograds = [None] * len(outs) if node.op.is_loss else [gbuf[e] for e in outs]
            r.igrads, r.reqs, r.post = [None] * node.num_args, ['null'] * node.num_args, []
            for pos, e, dup in ins:
                req = contrib_req(e)
                if dup:
                    tmp = tmps[(nid, pos)]
                    r.igrads[pos], r.reqs[pos] = tmp, 'write'
                    r.post.append((NDArray(tmp, ctx), NDArray(gbuf[e], ctx)))
                else:
                    r.igrads[pos], r.reqs[pos] = gbuf[e], req
            bwd_plan.append(r)
        self._fwd_plan, self._bwd_plan = fwd_plan, bwd_plan
        # a graph with no wide region (a chain, residual blocks) makes no schedule at all
        plans = self._runs = train_plans(view, shapes, types, ctx, fwd_plan, bwd_plan, _Rec) \
            if self._var_req else (fwd_plan, bwd_plan)
        self._calls = CallPlan(view.nodes, *plans, branches=branchy and len(cuts) < len(fwd_plan))
        self._fused = CallPlan(view.nodes, fused_plan(fwd_plan, chains, _Rec, view.nodes), []) \
            if chains else None

    # ------------------------------------------------------------ running
    def forward(self, is_train=False, **kwargs):
        """Run the graph; ``kwargs`` are copied into the argument arrays first.

        Returns
        -------
        list of NDArray
            :attr:`outputs`.

        Raises
        ------
        ArgumentError
            For a name that is not an argument, or a value that is not numeric.
        ShapeError
            ``Shape not match! Argument data, need: (3, 4), received: (2, 4)``.
        """
        if kwargs:
            arg_dict = self.arg_dict
            for name, value in kwargs.items():
                if name not in arg_dict:
                    raise ArgumentError('Unknown argument %s; arguments are %s'
                                        % (name, self._arg_names))
                dst = arg_dict[name]
                if not isinstance(value, NDArray):
                    value = _host_values('forward: argument %s' % name, value)
                shape = tuple(value.shape)
                if shape != dst.shape:
                    raise ShapeError('Shape not match! Argument %s, need: %s, received: %s'
                                     % (name, dst.shape, shape))
                dst._copy_from(value)
        self._run_pass('forward', self._fwd_plan, self._run_forward, is_train)
        return self.outputs

    def _run_pass(self, what, plan, run, is_train):
        """``run(is_train)``; the first time, under :func:`compile_notice.first_run`."""
        if what in self._warm:
            return run(is_train)
        ahead = getattr(self, '_ahead', None)
        if what == 'forward' and is_train and ahead is None:
            # the cold start: a child compiles kernels from the back meanwhile
            ahead = self._ahead = _compile_ahead.start(
                self._ctx.device_type, *_compile_ahead.named(self._view.nodes, self._runs)) or False
        elif what == 'backward' and ahead:
            ahead.before_backward(getattr(self, '_first_forward_s', 0.0))
        tic = time.perf_counter()
        with compile_notice.first_run([self._view.nodes[r.nid].op.name for r in plan], what):
            run(is_train)
        if what == 'forward':
            self._first_forward_s = time.perf_counter() - tic
        elif ahead:
            ahead.done()
        self._warm.add(what)

    def _run_forward(self, is_train):
        self._calls.set_train(is_train)
        monitor = self._monitor
        self._pairs_ran = monitor is None        # training pairs fused (a backward must be too)
        if monitor is None:
            if not is_train and self._fused is not None:
                return self._fused.forward()   # the same OpContexts, set just above
            return self._calls.forward()
        for r in self._fwd_plan:
            if self._monitor_all:
                self._run_monitor(r, inputs=True)
            try:
                r.fwd(r.ctx, r.p, r.ins, r.outs, r.aux)
            except Exception as e:  # name the node; never leak a bare kernel traceback
                _reraise(self._view.nodes[r.nid], 'forward', e)
            self._run_monitor(r)

    def _run_monitor(self, r, backward=False, inputs=False):
        node = self._view.nodes[r.nid]
        report(self._monitor, self._monitor_all, node, r, self._ctx, backward,
               [self._shapes[e] for e in self._view.in_entries[r.nid][:node.num_args]], inputs)

    def backward(self, out_grads=None, is_train=True):
        """Compute gradients into :attr:`grad_arrays` per ``grad_req``.

        Parameters
        ----------
        out_grads : NDArray, list or dict of NDArray, optional
            Head gradients (by output order or name). Required for every head
            that is not a loss op; ignored (whatever their shape) for the
            outputs of operators with a zero gradient (``argmax``,
            ``shape_array``, comparisons, ``topk`` indices, ...), as MXNet.

        As MXNet, ``backward`` may run after ``forward(is_train=False)`` or
        before any ``forward``: it reads whatever the forward buffers hold.

        Raises
        ------
        FFError
            When a head that needs one has no gradient.
        ShapeError
            For more ``out_grads`` than outputs or one of the wrong shape.
        """
        ograds = self._norm_out_grads(out_grads)
        for g in self._zero_grads:
            NDArray(g, self._ctx)._fill(0)
        for k, e, req in self._head_plan:
            g = ograds[k]
            if g is None:
                raise FFError(_HEAD_MSG)
            if not isinstance(g, NDArray):
                g = _host_values('backward: out_grads[%d]' % k, g)
            dst = self._gbuf[e]
            if tuple(g.shape) != tuple(dst.shape):
                raise ShapeError('backward: out_grads[%d] (%s) has shape %s, output has %s'
                                 % (k, self._out_names[k], tuple(g.shape), tuple(dst.shape)))
            self._assign(dst, g, req)
        self._run_pass('backward', self._bwd_plan, self._run_backward, is_train)

    def _run_backward(self, is_train):
        self._calls.set_train(is_train)
        monitor = self._monitor
        if monitor is None:
            return self._calls.backward()
        # after a fused forward the pairs' intermediate was never written: their fused
        for r in self._runs[1] if self._pairs_ran else self._bwd_plan:  # backward, as one node
            try:
                r.bwd(r.ctx, r.p, r.ograds, r.ins, r.outs, r.igrads, r.reqs, r.aux)
            except Exception as e:
                _reraise(self._view.nodes[r.nid], 'backward', e)
            for tmp, dst in r.post:
                dst._add_from(tmp)
            self._run_monitor(r, backward=True)

    def _assign(self, dst, g, req):
        dst = NDArray(dst, self._ctx)
        if req == 'write':
            dst._copy_from(g)
        else:
            dst._add_from(g)

    def _norm_out_grads(self, out_grads):
        n = len(self._out_names)
        if out_grads is None:
            return [None] * n
        if isinstance(out_grads, (NDArray, np.ndarray)):
            out_grads = [out_grads]
        if isinstance(out_grads, dict):
            for k in out_grads:
                if k not in self._out_names:
                    raise ArgumentError('backward: %r is not an output; outputs are %s'
                                        % (k, self._out_names))
            return [out_grads.get(name) for name in self._out_names]
        out_grads = list(out_grads)
        if len(out_grads) > n:
            raise ShapeError('backward: %d out_grads for %d outputs %s'
                             % (len(out_grads), n, self._out_names))
        return out_grads + [None] * (n - len(out_grads))

    # ------------------------------------------------------------ views
    @property
    def arg_dict(self):
        """Argument arrays by name."""
        return dict(zip(self._arg_names, self.arg_arrays))

    @property
    def grad_dict(self):
        """Gradient arrays by argument name (``None`` where none was given or allocated)."""
        return dict(zip(self._arg_names, self.grad_arrays))

    @property
    def aux_dict(self):
        """Auxiliary-state arrays by name."""
        return dict(zip(self._aux_names, self.aux_arrays))

    @property
    def output_dict(self):
        """Output arrays by output name."""
        return dict(zip(self._out_names, self.outputs))

    @property
    def fused_nodes(self):
        """The node chains ``forward(is_train=False)`` runs as one fused call (ffnumba only).

        A list of tuples of node names (``('conv1', 'bn1', 'relu1')``, or two
        of them), one per ``Convolution [-> BatchNorm] [-> Activation('relu')]``
        chain: empty for an executor with gradients, on a GPU, or with
        ``FFNUMBA_FUSE=0``. A forward with a monitor installed or with
        ``is_train=True`` runs none of them. See :mod:`ffnumba._executor_fuse`
        (training pairs, not listed here: :mod:`ffnumba._executor_train_fuse`).
        """
        nodes = self._view.nodes
        return [tuple(nodes[n].name for n in chain if n is not None) for chain in self._chains]

    @property
    def grad_req(self):
        """The effective grad_req per argument name."""
        return dict(self._grad_req)

    def set_monitor_callback(self, callback, monitor_all=False):
        """Call ``callback(name, NDArray)`` for every operator output after it runs.

        As MXNet: forward outputs are ``<node>_output`` (``_output<i>`` for
        several), and after each node's backward its input gradients are
        ``<node>_backward_output`` (``_output<i>``; zeros where no gradient
        is requested). With ``monitor_all``, the forward inputs
        (``<node>_<input>``) and the backward's inputs
        (``<node>_backward_input<i>``: head gradients, then the forward
        inputs) are reported too; a training executor then stops sharing
        the buffers of the values a backward does not read (a new memory
        plan: :attr:`outputs` are new arrays).
        """
        self._monitor = callback
        self._monitor_all = bool(monitor_all)
        if self._monitor_all and not self._keep_all and self._bwd_plan:
            # the backward report shows every forward input: keep them all (a new plan,
            # so `outputs` are new arrays)
            self._keep_all = True
            self._setup((self._shapes, self._types))

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        """Copy parameter values into this executor's arrays (cast to their dtype).

        Raises
        ------
        ParamError
            ``Find name "foo" that is not in the arguments`` unless
            ``allow_extra_params``, or ``arg_params``/``aux_params`` not a dict.
        ShapeError
            For a value whose shape differs from the executor's array.
        """
        for what, params in (('arg_params', arg_params), ('aux_params', aux_params)):
            if params is not None and not isinstance(params, dict):
                raise ParamError('copy_params_from: `%s` must be a dict of str to NDArray. '
                                 'Received: %s' % (what, type(params).__name__))
        arg_dict, aux_dict = self.arg_dict, self.aux_dict
        for name, arr in (arg_params or {}).items():
            if name in arg_dict:
                _copy_into(arr, arg_dict[name], name)
            elif not allow_extra_params:
                raise ParamError('Find name "%s" that is not in the arguments' % name)
        for name, arr in (aux_params or {}).items():
            if name in aux_dict:
                _copy_into(arr, aux_dict[name], name)
            elif not allow_extra_params:
                raise ParamError('Find name %s that is not in the auxiliary states' % name)

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor for new input shapes, sharing parameter arrays with this one.

        Arrays whose shape is unchanged are shared. A changed array (and an
        operator output) that is not larger reuses this one's memory; a larger one needs
        ``allow_up_sizing``. Arguments not named in ``kwargs`` may change
        shape only with ``partial_shaping``.

        Raises
        ------
        ShapeError
            On a forbidden change of shape.
        """
        view = self._view
        shapes = _infer.infer_shapes(view, kwargs, use_hints=False)
        ctx = self._ctx
        new_args, new_grads, new_aux = [], [], []

        def remake(name, old, shape, what):
            if old.shape == shape:
                return old
            if name not in kwargs and not partial_shaping:
                raise ShapeError('Shape of unspecified array %s:%s changed. This can cause the '
                                 'new executor to not share parameters with the old one. Please '
                                 'check for error in network. If this is intended, set '
                                 'partial_shaping=True to suppress this warning.' % (what, name))
            size = int(np.prod(shape, dtype=np.int64))
            if size > old.size:
                if not allow_up_sizing:
                    raise ShapeError('New shape of %s:%s larger than original. First making a '
                                     'big executor and then down sizing it is more efficient '
                                     'than the reverse. If you really want to up size, set '
                                     'allow_up_sizing=True to enable allocation of new arrays.'
                                     % (what, name))
                return _zeros(shape, old.dtype, ctx)
            return _view_of(old, shape)

        for nid, name, a, g in zip(view.arg_nodes, self._arg_names, self.arg_arrays,
                                   self.grad_arrays):
            s = shapes[view.entry_ptr[nid]]
            if s is None:
                raise ShapeError('reshape: cannot infer the shape of argument %s' % name)
            new_args.append(remake(name, a, s, 'arg'))
            new_grads.append(None if g is None else remake(name, g, s, 'arg'))
        for nid, name, a in zip(view.aux_nodes, self._aux_names, self.aux_arrays):
            s = shapes[view.entry_ptr[nid]]
            if s is None:
                raise ShapeError('reshape: cannot infer the shape of %s' % name)
            new_aux.append(remake(name, a, s, 'aux'))
        grads = None if all(g is None for g in new_grads) else new_grads
        return Executor(self._symbol, ctx, new_args, grads, self._grad_req, new_aux,
                        _reshaped=self)

    def debug_str(self):
        """The symbol's listing, the backward nodes and the memory plan (MXNet's format).

        After the symbol's own listing, each running backward appears as
        MXNet lists it (``Op:_backward_<op>``, its inputs: the gradients of
        its outputs and the forward values it reads), then the storage of
        every operator output and intermediate gradient (see
        :func:`ffnumba._memory_plan.describe`). ``Total N MB allocated``
        counts the buffers this executor made (operator outputs, gradient
        buffers), not the argument, gradient and auxiliary arrays it was
        bound to, as MXNet counts its memory plan.
        """
        return (self._symbol.debug_str() + '\n'.join(describe(self._view, self._plan))
                + '\nTotal %d MB allocated\nTotal 0 TempSpace resource requested\n'
                % (self._plan.total_bytes >> 20))

    def __repr__(self):
        return '<Executor %s @%s>' % (self._symbol.name or 'group', self._ctx)


def simple_bind(symbol, ctx, grad_req='write', type_dict=None, shared_arg_names=None,
                shared_exec=None, shared_buffer=None, group2ctx=None, **kwargs):
    """Bind ``symbol`` to new zero arrays whose shapes and dtypes are inferred.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
    grad_req : str, list or dict, default 'write'
    type_dict : dict of str to dtype, optional
        Input dtypes; the rest is inferred, float32 where nothing says otherwise.
    shared_arg_names : list of str, optional
        Arguments (parameters) whose arrays and gradients are taken from
        ``shared_exec`` when it has them with the same shape and dtype.
    shared_exec : Executor, optional
        The executor to share with (also its auxiliary states, by name).
    shared_buffer : dict, optional
        Arrays for the other arguments, by name (gradients under
        ``'grad of ' + name``). An entry at least as large is reused as a
        view; otherwise a new array is allocated and stored in the dict.
    group2ctx : dict of str to Context, optional
        Model parallelism: arguments (and their gradients) of a variable
        whose ``ctx_group`` attribute names a group are placed on its
        context; the same device type as ``ctx`` (CPU ids, or ``ctx`` itself).
    **kwargs : tuple
        Input shapes by name (names that are not inputs are ignored, as in MXNet).

    Returns
    -------
    Executor

    Raises
    ------
    ShapeError
        If some shape cannot be inferred (naming the arguments).
    """
    args, grads, reqs, aux, inferred = allocate(
        symbol, ctx, grad_req=grad_req, type_dict=type_dict, shared_arg_names=shared_arg_names,
        shared_exec=shared_exec, shared_buffer=shared_buffer, group2ctx=group2ctx, **kwargs)
    return Executor(symbol, ctx, args, grads, reqs, aux, _inferred=inferred)
