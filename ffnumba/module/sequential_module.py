"""SequentialModule: modules chained output to input (MXNet ``mx.mod.SequentialModule``).

``add(module, take_labels=False, auto_wiring=False)`` appends a module. On
bind the output shapes of each module become the data shapes of the next
(renamed to the next module's data names with ``auto_wiring``); forward
feeds ``get_outputs()`` on, backward passes ``get_input_grads()`` back.
"""
import copy
import logging

from ..base import FFError, ParamError
from .base_module import BaseModule

__all__ = ['SequentialModule']


class SequentialModule(BaseModule):
    """A container of modules run one after another.

    Parameters
    ----------
    logger : logging.Logger, default logging
    """

    META_TAKE_LABELS = 'take_labels'
    META_AUTO_WIRING = 'auto_wiring'

    def __init__(self, logger=logging):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module, **kwargs):
        """Append ``module``; options ``take_labels`` and ``auto_wiring``. Returns self.

        Raises
        ------
        ParamError
            For an unknown option.
        """
        for key in kwargs:
            if key not in self._meta_keys:
                raise ParamError('SequentialModule.add: unknown meta %r, expected one of %s'
                                 % (key, sorted(self._meta_keys)))
        self._modules.append(module)
        self._metas.append(kwargs)
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    @property
    def data_names(self):
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        self._check_ready('data_shapes', params=False)
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        self._check_ready('label_shapes', params=False)
        return self._label_shapes

    @property
    def output_shapes(self):
        self._check_ready('output_shapes', params=False)
        return self._modules[-1].output_shapes

    def get_params(self):
        """The union of every module's parameters."""
        self._check_ready('get_params')
        arg_params, aux_params = {}, {}
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
        return arg_params, aux_params

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise every module; parameter names must be unique across modules."""
        if self.params_initialized and not force_init:
            return
        self._check_ready('init_params', params=False)
        if initializer is None and arg_params is None:
            from .. import initializer as init
            initializer = init.Uniform(0.01)
        for module in self._modules:
            module.init_params(initializer=initializer, arg_params=arg_params,
                               aux_params=aux_params, allow_missing=allow_missing,
                               force_init=force_init, allow_extra=allow_extra)
        seen = {}
        for i, module in enumerate(self._modules):
            arg, aux = module.get_params()
            for name in list(arg) + list(aux):
                if name in seen:
                    raise FFError('SequentialModule: duplicated parameter name %r in layer %d '
                                  '(%s) and layer %d (%s)'
                                  % (name, seen[name], type(self._modules[seen[name]]).__name__,
                                     i, type(module).__name__))
                seen[name] = i
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind each module on the output shapes of the previous one."""
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if inputs_need_grad and not for_training:
            raise ParamError('SequentialModule.bind: inputs_need_grad needs for_training=True')
        if shared_module is not None:
            raise FFError('Shared module is not supported by SequentialModule')
        if not self._modules:
            raise FFError('SequentialModule: add at least one module before bind')
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._label_shapes = label_shapes
        shapes = data_shapes
        needs_label = False
        for i, (module, meta) in enumerate(zip(self._modules, self._metas)):
            if meta.get(self.META_TAKE_LABELS, False):
                my_labels = label_shapes
                needs_label = True
            else:
                my_labels = None
            my_need_grad = bool(inputs_need_grad or (for_training and i > 0))
            if meta.get(self.META_AUTO_WIRING, False):
                names = module.data_names
                if len(names) != len(shapes):
                    raise FFError('SequentialModule: layer %d takes %d inputs but receives %d'
                                  % (i, len(names), len(shapes)))
                shapes = [(n, tuple(s[1])) for n, s in zip(names, shapes)]
            module.bind(data_shapes=shapes, label_shapes=my_labels, for_training=for_training,
                        inputs_need_grad=my_need_grad, force_rebind=force_rebind,
                        shared_module=None, grad_req=grad_req)
            shapes = module.output_shapes
        if not needs_label:
            self._label_shapes = None
        self.binded = True

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Initialise the optimizer of every module."""
        self._check_ready('init_optimizer')
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return
        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                                  optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        """Run every module, feeding each one's outputs to the next."""
        self._check_ready('forward')
        batch = copy.copy(data_batch)
        for i, module in enumerate(self._modules):
            module.forward(batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            batch.data = module.get_outputs()
            if hasattr(batch, 'provide_data'):
                names = [x[0] for x in module.output_shapes]
                batch.provide_data = [(n, x.shape) for n, x in zip(names, batch.data)]

    def backward(self, out_grads=None):
        """Backward through the modules in reverse, passing input gradients back."""
        self._check_ready('backward')
        for i in range(len(self._modules) - 1, -1, -1):
            module = self._modules[i]
            module.backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = module.get_input_grads()

    def update(self):
        self._check_ready('update')
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context=True):
        self._check_ready('get_outputs')
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._check_ready('get_input_grads')
        if not self.inputs_need_grad:
            raise FFError('get_input_grads: bind with inputs_need_grad=True')
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update the metric with the modules that take labels."""
        for meta, module in zip(self._metas, self._modules):
            if meta.get(self.META_TAKE_LABELS, False):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._check_ready('install_monitor', params=False)
        for module in self._modules:
            module.install_monitor(mon)
