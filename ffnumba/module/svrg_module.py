"""SVRGModule: stochastic variance-reduced gradient training (MXNet contrib ``SVRGModule``).

Every ``update_freq`` epochs the module snapshots its weights ``w~`` into an
auxiliary Module and computes the full gradient ``mu`` over the whole
training set at ``w~``. Each batch B then runs forward/backward on both
modules and the gradient used by the optimizer is

    g <- grad f_B(w) - grad f_B(w~) + mu

(Johnson & Zhang 2013, "Accelerating Stochastic Gradient Descent using
Predictive Variance Reduction"). With several devices each device keeps its
own ``mu``, and the sum over devices equals the single-device value.
"""
import logging

import numpy as np

from ..base import ParamError
from .module import Module

__all__ = ['SVRGModule']


class SVRGModule(Module):
    """A Module trained with the SVRG gradient rule.

    Parameters
    ----------
    symbol, data_names, label_names, logger, context, work_load_list,
    fixed_param_names, state_names, group2ctxs, compression_params
        As for :class:`Module`.
    update_freq : int
        Epochs between full-gradient passes; a positive int.

    Raises
    ------
    ParamError
        If ``update_freq`` is not a positive int.
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=logging, context=None, work_load_list=None, fixed_param_names=None,
                 state_names=None, group2ctxs=None, compression_params=None, update_freq=None):
        super().__init__(symbol, data_names=data_names, label_names=label_names, logger=logger,
                         context=context, work_load_list=work_load_list,
                         fixed_param_names=fixed_param_names, state_names=state_names,
                         group2ctxs=group2ctxs, compression_params=compression_params)
        if isinstance(update_freq, bool) or not isinstance(update_freq, (int, np.integer)) \
                or update_freq <= 0:
            raise ParamError('SVRGModule: `update_freq` must be a positive int (epochs between '
                             'full-gradient passes). Received: update_freq=%r' % (update_freq,))
        self.update_freq = int(update_freq)
        self._mod_aux = Module(symbol, data_names=data_names, label_names=label_names,
                               logger=logger, context=self._context,
                               work_load_list=self._work_load_list,
                               fixed_param_names=fixed_param_names, state_names=state_names,
                               group2ctxs=group2ctxs)
        self._param_dict = None
        self._ctx_len = len(self._context)
        self._full_kv = None

    def _reset_bind(self):
        super()._reset_bind()
        self._mod_aux._reset_bind()

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind this module and the auxiliary (snapshot) module."""
        super().bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                     shared_module, grad_req)
        if for_training:
            self._mod_aux.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                               force_rebind, None, grad_req)

    def reshape(self, data_shapes, label_shapes=None):
        super().reshape(data_shapes, label_shapes)
        if self._mod_aux.binded:
            self._mod_aux.reshape(data_shapes, label_shapes)

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the parameters; the first call also seeds the snapshot module.

        Later calls (``fit`` calls ``set_params`` every epoch) leave the snapshot
        ``w~`` alone: only :meth:`update_full_grads` moves it, together with ``mu``.
        """
        super().init_params(initializer, arg_params, aux_params, allow_missing, force_init,
                            allow_extra)
        if self._mod_aux.binded and not self._mod_aux.params_initialized:
            arg, aux = self.get_params()
            self._mod_aux.set_params(arg, aux)

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the optimizer and the per-device full-gradient buffers ``mu``."""
        from .. import kvstore as kvs
        from .. import ndarray as nd
        super().init_optimizer(kvstore, optimizer, optimizer_params, force_init)
        shapes = {n: a.shape for n, a in self._arg_params.items()}
        self._param_dict = [{n: nd.zeros(s, self._context[i]) for n, s in shapes.items()}
                            for i in range(self._ctx_len)]
        if self._kvstore is not None and self._kvstore.num_workers > 1:
            self._full_kv = kvs.create(self._kvstore.type)
            for name in self._exec_group.param_names:
                self._full_kv.init(name + '_full', nd.zeros(shapes[name]))

    def _fit_epoch_begin(self, epoch, train_data):
        if epoch % self.update_freq == 0:
            self.update_full_grads(train_data)

    def update_full_grads(self, train_data):
        """Snapshot the weights and compute the mean gradient ``mu`` over ``train_data``.

        ``mu`` is the sum of the batch gradients divided by the number of
        batches (the last batch counted by its real fraction
        ``1 - pad/batch_size``); it is reset before each pass.
        """
        g = self._exec_group
        names = g.param_names
        arg, aux = self.get_params()
        self._mod_aux.set_params(arg, aux)
        acc = [{n: np.zeros(self._param_dict[k][n].shape, np.float64) for n in names}
               for k in range(self._ctx_len)]
        train_data.reset()
        nbatch, padding = 0, 0
        aux_group = None
        for batch in train_data:
            self._mod_aux.forward_backward(batch)
            aux_group = self._mod_aux._exec_group
            nbatch += 1
            for k in range(self._ctx_len):
                for index, name in enumerate(names):
                    grad = aux_group.grad_arrays[index][k]
                    if grad is not None:
                        acc[k][name] += grad.asnumpy()
            padding = batch.pad or 0
        train_data.reset()
        if nbatch == 0:
            return
        true_num_batch = nbatch - padding / float(train_data.batch_size)
        for name in names:
            per_dev = [acc[k][name] / true_num_batch for k in range(self._ctx_len)]
            if self._ctx_len > 1 or self._full_kv is not None:
                total = np.sum(per_dev, axis=0)
                if self._full_kv is not None:
                    from .. import ndarray as nd
                    buf = nd.array(total)
                    self._full_kv.push(name + '_full', buf)
                    self._full_kv._barrier()
                    self._full_kv.pull(name + '_full', out=buf)
                    total = buf.asnumpy()
                per_dev = [total / self._ctx_len] * self._ctx_len
            for k in range(self._ctx_len):
                self._param_dict[k][name][:] = per_dev[k].astype(
                    self._param_dict[k][name].dtype)

    def forward(self, data_batch, is_train=None):
        """Forward on this module, and on the snapshot module when training."""
        super().forward(data_batch, is_train)
        if is_train:
            self._mod_aux.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        """Backward on this module and on the snapshot module."""
        super().backward(out_grads)
        if self._mod_aux.binded:
            self._mod_aux.backward(out_grads)

    def forward_backward(self, data_batch):
        super().forward_backward(data_batch)
        self._mod_aux.forward_backward(data_batch)

    def _update_svrg_gradients(self):
        """Replace each device gradient by ``g(w) - g(w~) + mu`` in place."""
        g = self._exec_group
        aux_g = self._mod_aux._exec_group
        for k in range(self._ctx_len):
            for index, name in enumerate(g.param_names):
                cur = g.grad_arrays[index][k]
                if cur is None:
                    continue
                snap = aux_g.grad_arrays[index][k]
                mu = self._param_dict[k][name]
                cur._add_from(snap, sign=-1)
                cur._add_from(mu)

    def update(self):
        """Apply the SVRG gradient rule, then the normal update."""
        self._update_svrg_gradients()
        super().update()

    def prepare(self, data_batch, sparse_row_id_fn=None):
        super().prepare(data_batch, sparse_row_id_fn)
        self._mod_aux.prepare(data_batch, sparse_row_id_fn)
