"""Module: a symbol bound to one or more devices, with parameters and an optimizer.

The intermediate-level API (MXNet ``mx.mod.Module``)::

    mod = ff.mod.Module(net, context=[ff.cpu(0), ff.cpu(1)])
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(ff.init.Xavier())
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.1})
    for batch in it:
        mod.forward(batch, is_train=True); mod.backward(); mod.update()
        mod.update_metric(metric, batch.label)

The training loop itself (``fit``) lives in :class:`BaseModule`.
"""
import logging
import warnings

from ..base import FFError, ParamError
from ..context import cpu
from ._checks import (_MissingParamError, _check_batch, _check_contexts, _check_input_names,
                      _check_loaded_params, _check_param_dicts, _copy_param, _parse_data_desc)
from .base_module import BaseModule
from .. import checkpoint as _ckpt
from . import _resume
from .executor_group import DataParallelExecutorGroup
from ..kvstore.updates import _initialize_kvstore, _update_params, _update_params_on_kvstore

_LOG = logging.getLogger(__name__)

__all__ = ['Module']


class Module(BaseModule):
    """A symbol bound to devices, trained with an optimizer.

    Parameters
    ----------
    symbol : Symbol
    data_names : list of str, default ('data',)
    label_names : list of str, default ('softmax_label',)
        May be empty or None for a symbol without labels.
    logger : logging.Logger, default logging
    context : Context or list of Context, default cpu()
        Several contexts split each batch (data parallelism). With two or
        more CPU contexts, training caps the BLAS thread count of the whole
        process (never restored); ``FFNUMBA_BLAS_THREADS=0`` leaves BLAS
        alone, ``FFNUMBA_BLAS_THREADS=N`` caps it at N (see
        :class:`~ffnumba.module.executor_group.DataParallelExecutorGroup`).
    work_load_list : list of float, optional
        Relative share of each context (default equal).
    fixed_param_names : list of str, optional
        Parameters that are never updated (``grad_req='null'``).
    state_names : list of str, optional
        Arguments that are states, set with :meth:`set_states`.
    group2ctxs, compression_params : optional
        ``compression_params`` is given to ``kvstore.set_gradient_compression``.

    Raises
    ------
    ParamError
        (a ValueError) for a data, state or fixed name that is not an argument
        of ``symbol``, with MXNet's "Did you mean one of" hint.
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=logging, context=None, work_load_list=None, fixed_param_names=None,
                 state_names=None, group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)
        self._context = _check_contexts('Module', [cpu()] if context is None else context)
        if work_load_list is None:
            work_load_list = [1] * len(self._context)
        if len(work_load_list) != len(self._context):
            raise ParamError('Module: `work_load_list` must have one entry per context (%d). '
                             'Received: work_load_list=%r' % (len(self._context),
                                                              work_load_list))
        self._work_load_list = list(work_load_list)
        self._group2ctxs = group2ctxs
        self._symbol = symbol
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, data_names, 'data', True)
        _check_input_names(symbol, label_names, 'label', False)
        _check_input_names(symbol, state_names, 'state', True)
        _check_input_names(symbol, fixed, 'fixed_param', True)
        arg_names = symbol.list_arguments()
        inputs = set(data_names + label_names + state_names)
        self._param_names = [x for x in arg_names if x not in inputs]
        self._fixed_param_names = fixed
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()
        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False
        self._compression_params = compression_params
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._grad_req = None
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # ----------------------------------------------------------- loading
    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, allow_missing=False, **kwargs):
        """A Module from ``prefix-symbol.json`` and ``prefix-%04d.params``.

        Parameters
        ----------
        prefix : str
        epoch : int
        load_optimizer_states : bool, default False
            Also load ``prefix-%04d.states`` when the optimizer is initialised.
        allow_missing : bool, default False
            ffnumba's addition. When False, :meth:`bind` raises an FFError naming
            every parameter or auxiliary state of the symbol that the file lacks
            (MXNet binds them as zeros and predicts wrong numbers without a
            word). True keeps MXNet's behaviour: missing arrays stay zero, with
            a warning naming them.
        **kwargs
            Passed to :class:`Module`.

        Raises
        ------
        FFError
            When a file is missing, truncated or not a checkpoint (and at
            :meth:`bind`, when parameters are missing; see ``allow_missing``).
        """
        sym, args, auxs = _ckpt.load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        mod._loaded_from = ('%s-%04d.params' % (prefix, epoch), allow_missing)
        if load_optimizer_states:
            mod._preload_opt_states = '%s-%04d.states' % (prefix, epoch)
        return mod

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` and optionally ``.states``.

        Every file is written to a temporary name and renamed.
        """
        _ckpt.save_symbol('%s-symbol.json' % prefix, self._symbol)
        param_name = '%s-%04d.params' % (prefix, epoch)
        self.save_params(param_name)
        _LOG.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            state_name = '%s-%04d.states' % (prefix, epoch)
            _resume.attach(self)      # generator states go into the .states: exact resume
            self.save_optimizer_states(state_name)
            _LOG.info('Saved optimizer state to "%s"', state_name)

    def _reset_bind(self):
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # -------------------------------------------------------- properties
    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        self._check_ready('data_shapes', params=False)
        return self._data_shapes

    @property
    def label_shapes(self):
        self._check_ready('label_shapes', params=False)
        return self._label_shapes

    @property
    def output_shapes(self):
        self._check_ready('output_shapes', params=False)
        return self._exec_group.get_output_shapes()

    # ------------------------------------------------------------ params
    def get_params(self):
        """``(arg_params, aux_params)`` on the CPU: the mean of the device copies."""
        self._check_ready('get_params')
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the parameters in sorted name order.

        A name found in ``arg_params``/``aux_params`` is copied; any other is
        set by ``initializer(InitDesc(name, attrs), array)``.

        Values may be NDArrays or numpy arrays; names the symbol does not
        have are ignored (MXNet's rule).

        Raises
        ------
        RuntimeError
            (an FFError) ``"<name> is not presented"`` when a name is missing
            from the given dicts and ``allow_missing`` is False.
        ParamError
            When ``arg_params``/``aux_params`` is not a dict.
        ShapeError
            When a given value's shape differs from the parameter's.
        """
        if self.params_initialized and not force_init:
            warnings.warn('Parameters already initialized and force_init=False. '
                          'init_params call ignored.', stacklevel=2)
            return
        self._check_ready('init_params', params=False)
        _check_param_dicts('init_params', arg_params, aux_params)
        from .. import initializer as init_mod
        if initializer is None and arg_params is None and aux_params is None:
            initializer = init_mod.Uniform(0.01)
        elif isinstance(initializer, str):
            initializer = init_mod.create(initializer)
        elif initializer is not None and not callable(initializer):
            raise ParamError('Module.init_params: `initializer` must be an Initializer. '
                             'Received: initializer=%r' % (initializer,))
        attrs = self._symbol.attr_dict()

        def _impl(name, arr, cache):
            if cache is not None:
                if name in cache:
                    src = cache[name]
                    if src is not arr:
                        _copy_param(name, src, arr)
                    return
                if not allow_missing:
                    raise _MissingParamError('%s is not presented' % name)
            if initializer is not None:
                initializer(init_mod.InitDesc(name, attrs.get(name, {})), arr)

        if not allow_missing:
            missing = sorted([n for n in self._arg_params if arg_params is not None
                              and n not in arg_params]
                             + [n for n in self._aux_params if aux_params is not None
                                and n not in aux_params])
            if missing:
                raise _MissingParamError(
                    '%s is not presented (init_params: the given arg_params/aux_params lack '
                    '%d array(s) the symbol needs: %s; pass allow_missing=True to initialise '
                    'them with the initializer)' % (missing[0], len(missing),
                                                    ', '.join(missing)))
        for name, arr in sorted(self._arg_params.items()):
            _impl(name, arr, arg_params)
        for name, arr in sorted(self._aux_params.items()):
            _impl(name, arr, aux_params)
        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)

    def _copy_given_params(self, arg_params, aux_params, allow_extra):
        _check_param_dicts('set_params', arg_params, aux_params)
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)

    def _sync_params_from_devices(self):
        self._exec_group.get_params(self._arg_params, self._aux_params)
        self._params_dirty = False

    # -------------------------------------------------------------- bind
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Allocate executors for these input shapes.

        Parameters
        ----------
        data_shapes : list of DataDesc or (name, shape)
        label_shapes : list of DataDesc or (name, shape), optional
        for_training : bool, default True
        inputs_need_grad : bool, default False
        force_rebind : bool, default False
        shared_module : Module, optional
            A bound, initialised module whose parameters and optimizer are shared.
        grad_req : str, list or dict, default 'write'
        """
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if not for_training and inputs_need_grad:
            raise ParamError('Module.bind: `inputs_need_grad` needs for_training=True')
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self._data_names, self._label_names, data_shapes, label_shapes)
        shared_group = None
        if shared_module is not None:
            if not (isinstance(shared_module, Module) and shared_module.binded
                    and shared_module.params_initialized):
                raise FFError('Module.bind: shared_module must be a bound Module with '
                              'initialized parameters')
            shared_group = shared_module._exec_group
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad,
            shared_group, logger=self.logger, fixed_param_names=self._fixed_param_names,
            grad_req=grad_req, state_names=self._state_names, group2ctxs=self._group2ctxs)
        self.binded = True
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            _check_loaded_params(self, getattr(self, '_loaded_from', None))
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            from .. import ndarray as nd
            self._arg_params = {name: nd.zeros(devs[0].shape, dtype=devs[0].dtype)
                                for name, devs in zip(self._param_names,
                                                      self._exec_group.param_arrays)}
            self._aux_params = {name: nd.zeros(devs[0].shape, dtype=devs[0].dtype)
                                for name, devs in zip(self._aux_names,
                                                      self._exec_group.aux_arrays)}
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

    def reshape(self, data_shapes, label_shapes=None):
        """Reshape the executors for new input shapes (parameters shared)."""
        self._check_ready('reshape', params=False)
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self._data_names, self._label_names, data_shapes, label_shapes)
        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    # ---------------------------------------------------------- optimizer
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the optimizer, the kvstore (MXNet's rules) and the updater.

        ``rescale_grad`` defaults to ``1/batch_size`` (times the number of
        workers for a ``dist_*_sync`` store); ``param_idx2name`` maps updater
        indices to parameter names.
        """
        self._check_ready('init_optimizer')
        if self.optimizer_initialized and not force_init:
            warnings.warn('optimizer already initialized, ignoring...', stacklevel=2)
            return
        from .. import optimizer as opt
        from ..kvstore import _create_kvstore
        if self._params_dirty:
            self._sync_params_from_devices()
        kv, update_on_kvstore = _create_kvstore(kvstore, len(self._context), self._arg_params)
        batch_size = self._exec_group.batch_size
        if kv is not None and 'dist' in kv.type and '_sync' in kv.type:
            batch_size *= kv.num_workers
        rescale_grad = 1.0 / batch_size
        ndev = len(self._context)
        if update_on_kvstore:
            idx2name = dict(enumerate(self._exec_group.param_names))
        else:
            idx2name = {}
            for k in range(ndev):
                idx2name.update({i * ndev + k: n
                                 for i, n in enumerate(self._exec_group.param_names)})
        if isinstance(optimizer, str):
            try:
                params = dict(optimizer_params)
            except (TypeError, ValueError):
                raise ParamError('Module.init_optimizer: `optimizer_params` must be a dict or '
                                 '(name, value) pairs. Received: optimizer_params=%r'
                                 % (optimizer_params,)) from None
            params.setdefault('rescale_grad', rescale_grad)
            optimizer = opt.create(optimizer, sym=self._symbol, param_idx2name=idx2name,
                                   **params)
        else:
            if not isinstance(optimizer, opt.Optimizer):
                raise ParamError('Module.init_optimizer: `optimizer` must be a str or an '
                                 'Optimizer. Received: optimizer=%r' % (optimizer,))
            if getattr(optimizer, 'rescale_grad', rescale_grad) != rescale_grad:
                warnings.warn('Optimizer created manually outside Module but rescale_grad is '
                              'not normalized to 1.0/batch_size/num_workers (%s vs. %s). Is '
                              'this intended?' % (optimizer.rescale_grad, rescale_grad),
                              stacklevel=2)
            if not getattr(optimizer, 'idx2name', None):
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._kvstore = kv
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kv is not None:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(self._optimizer)
            _initialize_kvstore(kv, self._exec_group.param_arrays, self._arg_params,
                                self._param_names, update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, kvstore and updater."""
        if not shared_module.optimizer_initialized:
            raise FFError('borrow_optimizer: the shared module has no optimizer yet')
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname):
        """Save the optimizer states (safe, non-pickle format; atomic write)."""
        if not self.optimizer_initialized:
            raise FFError('save_optimizer_states: call init_optimizer first')
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            _ckpt.save_states(fname, self._updater.get_states())

    def load_optimizer_states(self, fname):
        """Load optimizer states written by :meth:`save_optimizer_states`."""
        if not self.optimizer_initialized:
            raise FFError('load_optimizer_states: call init_optimizer first')
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            _ckpt.load_states(self._updater, fname)

    # ---------------------------------------------------------- compute
    def _maybe_reshape(self, data_batch):
        """Re-shape the executors when the batch's shapes differ from the bound ones."""
        from ..io import DataDesc
        if isinstance(data_batch, list):
            shapes = []
            for i in range(len(data_batch[0].data)):
                shape = data_batch[0].data[i].shape
                for db in data_batch:
                    if db.data[i].shape != shape:
                        raise FFError('All data batches in a list need to have the same shape')
                shapes.append((len(data_batch) * shape[0],) + tuple(shape[1:]))
            new = tuple(shapes)
        else:
            new = tuple(d.shape for d in data_batch.data)
        cur = tuple(tuple(d.shape) for d in self._data_shapes)
        if cur == new:
            return
        if getattr(data_batch, 'provide_data', None):
            dshape = data_batch.provide_data
        else:
            dshape = [DataDesc(d.name, s, d.dtype, d.layout)
                      for d, s in zip(self._data_shapes, new)]
        if getattr(data_batch, 'provide_label', None):
            lshape = data_batch.provide_label
        elif getattr(data_batch, 'label', None) and self._label_shapes:
            lshape = [DataDesc(d.name, lab.shape, d.dtype, d.layout)
                      for d, lab in zip(self._label_shapes, data_batch.label)]
        elif self._label_shapes:
            # no labels in the batch (prediction): resize the bound labels' batch axis
            batch = self._exec_group.batch_size
            new_batch = None
            for d, s in zip(self._data_shapes, new):
                axis = d.layout.find('N') if d.layout else 0
                if axis >= 0:
                    new_batch = s[axis]
                    break
            lshape = []
            for d in self._label_shapes:
                shape = list(d.shape)
                axis = d.layout.find('N') if d.layout else 0
                if axis >= 0 and new_batch is not None and shape[axis] == batch:
                    shape[axis] = new_batch
                lshape.append(DataDesc(d.name, tuple(shape), d.dtype, d.layout))
        else:
            lshape = None
        self.reshape(dshape, lshape)

    def forward(self, data_batch, is_train=None):
        """Forward pass; re-shapes automatically for a batch of a new shape.

        Raises
        ------
        ParamError
            When ``data_batch`` is not a DataBatch (or a list of them) with
            one array per data name.
        """
        self._check_ready('forward')
        _check_batch(data_batch, self._data_names)
        self._maybe_reshape(data_batch)
        self._exec_group.forward(data_batch, is_train)

    def forward_backward(self, data_batch):
        """Forward and backward, run together in each device's thread."""
        self._check_ready('forward_backward')
        _check_batch(data_batch, self._data_names)
        self._maybe_reshape(data_batch)
        if not self.for_training:
            raise FFError('Module: bind with for_training=True to run backward')
        self._exec_group.forward_backward(data_batch)

    def backward(self, out_grads=None):
        """Backward pass (head gradients ``out_grads`` for non-loss outputs).

        Raises
        ------
        FFError
            When bound with ``for_training=False`` or before ``forward``.
        """
        self._check_ready('backward')
        if not self.for_training:
            raise FFError('Module: bind with for_training=True to run backward')
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        """Update the parameters with the gradients of the last backward."""
        self._check_ready('update')
        if not self.optimizer_initialized:
            raise FFError('Module.update: call init_optimizer first')
        self._params_dirty = True
        g = self._exec_group
        if self._update_on_kvstore:
            _update_params_on_kvstore(g.param_arrays, g.grad_arrays, self._kvstore,
                                      g.param_names)
        else:
            _update_params(g.param_arrays, g.grad_arrays, self._updater, len(self._context),
                           self._kvstore, g.param_names)

    def get_outputs(self, merge_multi_context=True):
        """The outputs of the last forward (merged over devices by default)."""
        self._check_ready('get_outputs')
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (bind with ``inputs_need_grad=True``)."""
        self._check_ready('get_input_grads')
        if not self.inputs_need_grad:
            raise FFError('get_input_grads: bind with inputs_need_grad=True')
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context=True):
        self._check_ready('get_states')
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the state arrays (``state_names``), from arrays or one scalar.

        Parameters
        ----------
        states : list of list of NDArray, optional
            One list per state name, one array per device, each of the
            bound state shape.
        value : float, optional
            Fill every state with this value instead.

        Raises
        ------
        FFError
            Before ``bind``/``init_params``.
        """
        self._check_ready('set_states')
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with the last outputs, device by device."""
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        """Install a :class:`~ffnumba.monitor.Monitor` on every executor."""
        self._check_ready('install_monitor', params=False)
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Nothing to prepare with dense storage."""
