"""BucketingModule: one Module per bucket key, all sharing one set of parameters.

``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)``. The
default bucket is bound first (make it the largest, so the others fit in its
memory); every other bucket binds with ``shared_module=`` the default one,
so parameters, gradients and the optimizer are shared (MXNet
``mx.mod.BucketingModule``, reference ``mxnet_api.md`` section 8).
"""
import logging
import warnings

from ..base import FFError, ParamError
from ..context import Context, cpu
from ..name import NameManager
from .base_module import BaseModule
from .. import checkpoint as _ckpt
from .module import Module
from ._checks import _check_input_names

__all__ = ['BucketingModule']


class BucketingModule(BaseModule):
    """Modules for inputs of several shapes (bucket keys) sharing parameters.

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key) -> (symbol, data_names, label_names)``.
    default_bucket_key : hashable
        Required. The bucket bound first; its memory is shared by the others.
    logger, context, work_load_list, fixed_param_names, state_names,
    group2ctxs, compression_params
        As for :class:`Module`.

    Raises
    ------
    ParamError
        If ``default_bucket_key`` is missing.
    """

    def __init__(self, sym_gen, default_bucket_key=None, logger=logging, context=None,
                 work_load_list=None, fixed_param_names=None, state_names=None,
                 group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise ParamError('BucketingModule: `default_bucket_key` must be given. '
                             'Received: default_bucket_key=None')
        if context is None:
            context = [cpu()]
        elif isinstance(context, Context):
            context = [context]
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        _check_input_names(symbol, list(data_names or []), 'data', True)
        _check_input_names(symbol, list(label_names or []), 'label', False)
        _check_input_names(symbol, list(state_names or []), 'state', True)
        _check_input_names(symbol, list(fixed_param_names or []), 'fixed_param', True)
        self._context = list(context)
        self._work_load_list = work_load_list
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None
        self._preload = None

    def _call_sym_gen(self, key):
        with NameManager():   # fresh default names per call (embedding0_weight...), as MXNet
            out = self._sym_gen(key)
        if not (isinstance(out, (tuple, list)) and len(out) == 3):
            raise FFError('BucketingModule: sym_gen(%r) must return (symbol, data_names, '
                          'label_names)' % (key,))
        return out

    def _new_module(self, key):
        symbol, data_names, label_names = self._call_sym_gen(key)
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names, state_names=self._state_names,
                      group2ctxs=self._group2ctxs, compression_params=self._compression_params)

    def _reset_bind(self):
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    # -------------------------------------------------------- properties
    @property
    def default_bucket_key(self):
        return self._default_bucket_key

    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        return list(self._call_sym_gen(self._default_bucket_key)[1])

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self):
        self._check_ready('data_shapes', params=False)
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        self._check_ready('label_shapes', params=False)
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        self._check_ready('output_shapes', params=False)
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        self._check_ready('symbol', params=False)
        return self._curr_module.symbol

    # ------------------------------------------------------------ params
    def get_params(self):
        self._check_ready('get_params')
        self._curr_module._params_dirty = self._params_dirty
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def _copy_given_params(self, arg_params, aux_params, allow_extra):
        self._curr_module.set_params(arg_params, aux_params, allow_missing=True,
                                     force_init=True, allow_extra=allow_extra)

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        self._check_ready('init_params', params=False)
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        self._check_ready('get_states')
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        self._check_ready('set_states')
        self._curr_module.set_states(states, value)

    # -------------------------------------------------------------- bind
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind the default bucket (``shared_module`` is not supported)."""
        if self.params_initialized and self.binded:
            arg_params, aux_params = self.get_params()
        elif self._preload is not None:
            arg_params, aux_params = self._preload
        else:
            arg_params = aux_params = None
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if shared_module is not None:
            raise FFError('shared_module for BucketingModule is not supported')
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        module = self._new_module(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        self.binded = True
        if arg_params is not None:
            self.params_initialized = False
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key`` current, binding its module on first use."""
        self._check_ready('switch_bucket', params=False)
        if bucket_key not in self._buckets:
            default = self._buckets[self._default_bucket_key]
            module = self._new_module(bucket_key)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=default, grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the optimizer on the current bucket; the others borrow it."""
        self._check_ready('init_optimizer')
        if self.optimizer_initialized and not force_init:
            warnings.warn('optimizer already initialized, ignoring.', stacklevel=2)
            return
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    # ---------------------------------------------------------- compute
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Bind the batch's bucket ahead of its forward."""
        key = getattr(data_batch, 'bucket_key', None)
        if key is None or not self.binded:
            return
        orig = self._curr_bucket_key
        self.switch_bucket(key, data_batch.provide_data, data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(orig, None, None)

    def _switch_for(self, data_batch):
        key = getattr(data_batch, 'bucket_key', None)
        if key is None:
            key = self._default_bucket_key
        self.switch_bucket(key, data_batch.provide_data, data_batch.provide_label)

    def forward(self, data_batch, is_train=None):
        """Switch to ``data_batch.bucket_key`` (binding it if new) and run forward."""
        self._check_ready('forward')
        self._switch_for(data_batch)
        self._curr_module.forward(data_batch, is_train=is_train)

    def forward_backward(self, data_batch):
        self._check_ready('forward_backward')
        self._switch_for(data_batch)
        self._curr_module.forward_backward(data_batch)

    def backward(self, out_grads=None):
        self._check_ready('backward')
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        self._check_ready('update')
        if not self.optimizer_initialized:
            raise FFError('BucketingModule.update: call init_optimizer first')
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        self._check_ready('get_outputs')
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._check_ready('get_input_grads')
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._check_ready('install_monitor', params=False)
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ------------------------------------------------------- checkpoints
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """Write the params, one ``prefix-KEY-symbol.json`` per bucket and ``prefix.buckets``.

        ``prefix.buckets`` is an ``nd.save`` list holding one int32 array of
        the bucket keys (int keys only).
        """
        from .. import ndarray as nd
        if not self._buckets:
            raise FFError('Empty BucketingModule cannot be saved')
        self.save_params('%s-%04d.params' % (prefix, epoch))
        for key, mod in self._buckets.items():
            _ckpt.save_symbol('%s-%s-symbol.json' % (prefix, key), mod.symbol)
        nd.save('%s.buckets' % prefix, [nd.array(list(self._buckets.keys()), dtype='int32')])

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, data_names=('data',),
             label_names=('softmax_label',), **kwargs):
        """A BucketingModule from :meth:`save_checkpoint` files.

        Without ``sym_gen`` the saved per-bucket symbols are used with
        ``data_names``/``label_names``; ``default_bucket_key`` defaults to the
        largest saved key.
        """
        from .. import ndarray as nd
        from .. import symbol as sym
        if sym_gen is None:
            keys = [int(k) for k in nd.load('%s.buckets' % prefix)[0].asnumpy().tolist()]
            syms = {k: sym.load('%s-%s-symbol.json' % (prefix, k)) for k in keys}

            def sym_gen(key):
                if key not in syms:
                    raise FFError('BucketingModule.load: no saved symbol for bucket key %r '
                                  '(saved: %s)' % (key, sorted(syms)))
                return syms[key], data_names, label_names
            if default_bucket_key is None:
                default_bucket_key = max(keys)
        mod = BucketingModule(sym_gen, default_bucket_key=default_bucket_key, **kwargs)
        arg, aux = _ckpt.load_params(prefix, epoch)
        mod._preload = (arg, aux)
        mod.params_initialized = True
        return mod
