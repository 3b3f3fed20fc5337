"""compile / fit / evaluate / predict for Keras-style models, over :class:`ffnumba.mod.Module`.

Losses map onto MXNet loss heads (the head's gradient is the loss's):

=================================================  =============================  ==============
``loss=``                                          head (node name)               label name
=================================================  =============================  ==============
'softmax', 'sparse_categorical_crossentropy',      ``SoftmaxOutput`` (softmax)    softmax_label
'categorical_crossentropy' (one-hot y, argmaxed)
'mse', 'mean_squared_error'                        ``LinearRegressionOutput``     lro_label
'mae', 'mean_absolute_error'                       ``MAERegressionOutput``        mae_label
'binary_crossentropy', 'sigmoid'                   ``LogisticRegressionOutput``   logistic_label
=================================================  =============================  ==============

The reported ``loss`` is computed from the head's outputs and the labels:
mean ``-log p[y]`` (softmax), mean squared / absolute error per sample
(averaged over output units), mean binary cross-entropy (logistic).
"""
import math
import warnings

import numpy as np

from ..base import FFError, ParamError
from .. import callback as cb
from .. import initializer as init
from .. import metric as M
from .. import optimizer as opt
from .. import symbol as S

__all__ = ['TrainingMixin', 'LOSSES']

#: loss name -> (kind, head op, head name)
LOSSES = {
    'softmax': ('softmax', 'SoftmaxOutput', 'softmax'),
    'sparse_categorical_crossentropy': ('softmax', 'SoftmaxOutput', 'softmax'),
    'categorical_crossentropy': ('onehot', 'SoftmaxOutput', 'softmax'),
    'mse': ('mse', 'LinearRegressionOutput', 'lro'),
    'mean_squared_error': ('mse', 'LinearRegressionOutput', 'lro'),
    'mae': ('mae', 'MAERegressionOutput', 'mae'),
    'mean_absolute_error': ('mae', 'MAERegressionOutput', 'mae'),
    'binary_crossentropy': ('logistic', 'LogisticRegressionOutput', 'logistic'),
    'sigmoid': ('logistic', 'LogisticRegressionOutput', 'logistic'),
}

_METRICS = {'acc': 'acc', 'accuracy': 'acc', 'mse': 'mse', 'mae': 'mae', 'rmse': 'rmse',
            'ce': 'ce', 'cross_entropy': 'ce', 'crossentropy': 'ce', 'f1': 'f1',
            'top_k_accuracy': 'top_k_accuracy', 'perplexity': 'perplexity'}


class LossMetric(M.EvalMetric):
    """The compiled loss, per sample, from head outputs and labels (history key ``loss``).

    Parameters
    ----------
    kind : {'softmax', 'onehot', 'mse', 'mae', 'logistic'}
    eps : float, default 1e-7
        Probabilities are clipped to ``[eps, 1 - eps]`` before the log (Keras).
    """

    def __init__(self, kind, eps=1e-7, name='loss'):
        super().__init__(name, has_global_stats=True)
        self.kind = kind
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = M.check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = np.asarray(label, np.float64), np.asarray(pred, np.float64)
            n = pred.shape[0]
            if self.kind in ('softmax', 'onehot'):
                prob = pred.reshape(n, -1)[np.arange(n), label.reshape(n).astype(np.int64)]
                value = -np.log(np.clip(prob, self.eps, 1.0)).sum()
            else:
                pred = pred.reshape(n, -1)
                label = label.reshape(n, -1)
                if self.kind == 'mse':
                    value = ((pred - label) ** 2).mean(axis=1).sum()
                elif self.kind == 'mae':
                    value = np.abs(pred - label).mean(axis=1).sum()
                else:
                    p = np.clip(pred, self.eps, 1 - self.eps)
                    value = -(label * np.log(p) + (1 - label) * np.log(1 - p)).mean(axis=1).sum()
            self._add(float(value), n)


def _make_metric(m):
    if isinstance(m, M.EvalMetric):
        return m
    if isinstance(m, str) and m.lower() in _METRICS:
        return M.create(_METRICS[m.lower()])
    if callable(m):
        return M.create(m)
    raise ParamError('compile: `metrics` entries must be one of %s, an EvalMetric or a '
                     'function. Received: %r' % (', '.join(repr(k) for k in sorted(_METRICS)), m))


class _Epochs:
    """Epoch-end work in fit: validation (pad-free), the Keras line, user callbacks."""

    def __init__(self, model, history, val, batch_size, epochs, verbose, callbacks):
        self.model, self.history, self.val = model, history, val
        self.batch_size, self.epochs, self.verbose = batch_size, epochs, verbose
        self.callbacks = callbacks

    def __call__(self, epoch, symbol=None, arg_params=None, aux_params=None):
        if self.val is not None:
            values = self.model._evaluate_arrays(self.val[0], self.val[1], self.batch_size)
            self.history.record(epoch, values, prefix='val_')
        logs = {k: v[-1] for k, v in self.history.history.items()
                if len(v) == len(self.history.epoch)}
        if self.verbose:
            print('Epoch %d/%d - %s' % (epoch + 1, self.epochs, ' - '.join(
                '%s: %.4f' % kv for kv in logs.items())), flush=True)
        for c in self.callbacks:
            c.on_epoch_end(epoch, logs)


class TrainingMixin:
    """Keras-style training over :class:`ffnumba.mod.Module` (mixed into Model)."""

    def _init_training(self):
        self._compiled = None
        self._module = None
        self._seen_shapes = {}
        self._pending = None
        self.history = None

    # ------------------------------------------------------------ compile
    def compile(self, optimizer='rmsprop', loss=None, metrics=None, ctx=None,
                initializer=None, kvstore='local', learning_rate=None, **optimizer_params):
        """Choose the optimizer, the loss head, the metrics and the devices.

        Parameters
        ----------
        optimizer : str or Optimizer, default 'rmsprop'
            A registered name ('sgd', 'adam', 'rmsprop', ...) or an instance.
        loss : str
            A key of :data:`LOSSES` (module docstring).
        metrics : list, optional
            Names ('acc'/'accuracy', 'mse', 'mae', 'rmse', 'ce', 'f1', ...),
            EvalMetric instances or functions ``f(label, pred)``.
        ctx : Context or list of Context, default [cpu(0)]
            Several contexts split each batch (data parallel).
        initializer : Initializer, default Xavier(uniform, avg, 3)
            Keras's glorot_uniform; biases start at zero.
        kvstore : str, default 'local'
        learning_rate : float, optional
            Shorthand for ``optimizer_params['learning_rate']``.
        **optimizer_params
            Passed to the optimizer (``momentum``, ``wd``, ``beta1``, ...).

        Raises
        ------
        ParamError
            For an unknown loss, metric or optimizer.
        """
        if not isinstance(loss, str) or loss.lower() not in LOSSES:
            raise ParamError('compile: `loss` must be one of %s. Received: loss=%r'
                             % (', '.join(repr(k) for k in LOSSES), loss))
        if learning_rate is not None:
            optimizer_params['learning_rate'] = learning_rate
        if isinstance(optimizer, str):
            opt.create(optimizer, **optimizer_params)   # fail now on a bad name or param
        elif not isinstance(optimizer, opt.Optimizer):
            raise ParamError('compile: `optimizer` must be a name or an Optimizer. '
                             'Received: optimizer=%r' % (optimizer,))
        elif optimizer_params:
            raise ParamError('compile: optimizer parameters go into the Optimizer instance. '
                             'Received: %r' % (sorted(optimizer_params),))
        metrics = [] if metrics is None else list(metrics) if isinstance(
            metrics, (list, tuple)) else [metrics]
        metric_objs = [_make_metric(m) for m in metrics]
        if ctx is None:
            from ..context import cpu
            ctx = [cpu(0)]
        ctx = list(ctx) if isinstance(ctx, (list, tuple)) else [ctx]
        self._compiled = dict(loss=loss.lower(), optimizer=optimizer,
                              optimizer_params=dict(optimizer_params), metrics=metric_objs,
                              ctx=ctx, kvstore=kvstore,
                              initializer=initializer or init.Xavier('uniform', 'avg', 3))
        if self._module is not None and self._module.params_initialized:
            self._pending = self._module.get_params()
        self._module = None

    @property
    def loss_kind(self):
        """'softmax', 'onehot', 'mse', 'mae' or 'logistic' (from the compiled loss)."""
        return LOSSES[self._need_compiled('loss')['loss']][0]

    @property
    def label_name(self):
        """The label argument of the loss head (``'softmax_label'``, ...)."""
        return LOSSES[self._need_compiled('label_name')['loss']][2] + '_label'

    @property
    def metrics_names(self):
        """``['loss', <metric names>...]``: the order :meth:`evaluate` returns."""
        return ['loss'] + [n for m in self._need_compiled('metrics_names')['metrics']
                           for n, _ in m.get_name_value()]

    def _need_compiled(self, what):
        if self._compiled is None:
            raise FFError('%s: %s needs compile() first.' % (self._display_name(), what))
        return self._compiled

    def _loss_head(self, outputs, logits):
        cfg = self._need_compiled('to_symbol(with_loss=True)')
        if len(outputs) != 1:
            raise FFError('%s: compile/fit support one output; this model has %d. Use '
                          'to_symbol(with_loss=False) and ff.mod.Module for more.'
                          % (self._display_name(), len(outputs)))
        kind, op, head = LOSSES[cfg['loss']]
        data = outputs[0]
        wanted = {'softmax': 'softmax', 'onehot': 'softmax', 'logistic': 'sigmoid'}.get(kind)
        if logits[0] is not None and logits[0][0] == wanted:
            data = logits[0][1]   # the head applies the activation itself
        return getattr(S, op)(data, name=head)

    # ------------------------------------------------------------ data
    def _data_dict(self, x):
        names = self._input_names()
        if isinstance(x, dict):
            arrays = dict(x)
            if sorted(arrays) != sorted(names):
                raise ParamError('%s: `x` keys must be the inputs %r. Received: %r'
                                 % (self._display_name(), names, sorted(arrays)))
        else:
            xs = list(x) if isinstance(x, (list, tuple)) else [x]
            if len(xs) != len(names):
                raise ParamError('%s: `x` must hold %d arrays (inputs %r). Received: %d'
                                 % (self._display_name(), len(names), names, len(xs)))
            arrays = dict(zip(names, xs))
        out = {}
        for name in names:
            a = np.asarray(arrays[name], dtype=np.float32)
            if a.ndim < 1:
                raise ParamError('%s: input %r must have a batch axis. Received shape %s'
                                 % (self._display_name(), name, a.shape))
            out[name] = a
            self._seen_shapes[name] = a.shape[1:]
        return out

    def _label_array(self, y, n):
        y = np.asarray(y)
        if y.shape[0] != n:
            raise ParamError('%s: `y` must have one row per sample (%d). Received shape %s'
                             % (self._display_name(), n, y.shape))
        kind = self.loss_kind
        if kind == 'onehot' and y.ndim == 2:
            y = y.argmax(axis=1)
        if kind in ('softmax', 'onehot'):
            return y.reshape(n).astype(np.float32)
        out = self.to_symbol(with_loss=False)
        shapes = {k: (1,) + tuple(v) for k, v in self._input_shapes().items()}
        oshape = out.infer_shape(**shapes)[1][0][1:]
        if y.size != n * int(np.prod(oshape)):
            raise ParamError('%s: `y` must match the output shape (None, %s). Received '
                             'shape %s' % (self._display_name(),
                                           ', '.join(map(str, oshape)), y.shape))
        return y.reshape((n,) + tuple(oshape)).astype(np.float32)

    def _iter(self, data, label, batch_size, shuffle=False):
        from ..io import NDArrayIter
        return NDArrayIter(data, label, batch_size=batch_size, shuffle=shuffle,
                           last_batch_handle='pad')

    def _get_module(self, data, batch_size, training):
        from ..module import Module
        if self._module is None:
            if self._compiled is not None:
                sym, labels = self.to_symbol(), [self.label_name]
                ctx = self._compiled['ctx']
            else:
                sym, labels, ctx = self.to_symbol(with_loss=False), None, None
            self._module = Module(sym, data_names=self._input_names(), label_names=labels,
                                  context=ctx)
        mod = self._module
        if not training and not mod.binded:
            if self._pending is None:
                raise FFError('%s: no weights yet; call fit() or load_weights() first.'
                              % self._display_name())
            bs = min(batch_size, len(next(iter(data.values()))))
            mod.bind([(k, (bs,) + v.shape[1:]) for k, v in data.items()], for_training=False)
        if not training and not mod.params_initialized:
            mod.set_params(*self._pending)
            self._pending = None
        return mod

    # ------------------------------------------------------------ fit
    def fit(self, x, y, batch_size=32, epochs=1, verbose=1, callbacks=None,
            validation_data=None, shuffle=True, initial_epoch=0):
        """Train with ``Module.fit``; return a :class:`ffnumba.callback.History`.

        Parameters
        ----------
        x : array, list or dict of arrays
            Samples along axis 0 (one array per input).
        y : array
            Class indices (softmax losses; one-hot for categorical_crossentropy)
            or targets shaped like the output (regression).
        batch_size : int, default 32
            The last partial batch is padded with samples from the start (MXNet).
        epochs : int, default 1
        verbose : {0, 1, 2}, default 1
            1: a progress bar per epoch (ff.callback.ProgressBar; tqdm when
            installed) and a line per epoch; 2: only the line; 0: silent.
        callbacks : list, optional
            Objects with ``on_epoch_end(epoch, logs)`` (Keras style) or
            MXNet batch-end callables ``f(BatchEndParam)``.
        validation_data : (x_val, y_val), optional
            Scored after each epoch without padding (``val_`` keys).
        shuffle : bool, default True
            Reshuffle the training data every epoch.
        initial_epoch : int, default 0

        Returns
        -------
        History
            ``history.history['loss'|'accuracy'|'val_loss'|...]``: one value per
            epoch; training values average the epoch's batches.
        """
        cfg = self._need_compiled('fit')
        data = self._data_dict(x)
        n = len(next(iter(data.values())))
        label = {self.label_name: self._label_array(y, n)}
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ParamError('fit: `batch_size` must be a positive int. Received: '
                             'batch_size=%r' % (batch_size,))
        val = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise ParamError('fit: `validation_data` must be a pair (x_val, y_val).')
            val = validation_data
        train = self._iter(data, label, batch_size, shuffle)
        mod = self._get_module(data, batch_size, training=True)
        history = cb.History()
        user = list(callbacks or ())
        keras_cbs = [c for c in user if hasattr(c, 'on_epoch_end')]
        batch_cbs = [history.batch_end] + [c for c in user if not hasattr(c, 'on_epoch_end')]
        if verbose == 1:
            batch_cbs.append(cb.ProgressBar(total=int(math.ceil(n / batch_size))))
        epoch_cbs = [history.epoch_end,
                     _Epochs(self, history, val, batch_size, initial_epoch + epochs, verbose,
                             keras_cbs)]
        metric = M.CompositeEvalMetric([LossMetric(self.loss_kind)] + cfg['metrics'])
        arg_params, aux_params = self._pending or (None, None)
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', message='optimizer already initialized')
            warnings.filterwarnings('ignore', message='Parameters already initialized')
            mod.fit(train, eval_metric=metric, epoch_end_callback=epoch_cbs,
                    batch_end_callback=batch_cbs, kvstore=cfg['kvstore'],
                    optimizer=cfg['optimizer'], optimizer_params=cfg['optimizer_params'],
                    initializer=cfg['initializer'], arg_params=arg_params,
                    aux_params=aux_params, force_init=arg_params is not None,
                    begin_epoch=initial_epoch, num_epoch=initial_epoch + epochs)
        self._pending = None
        self.history = history
        return history

    # ------------------------------------------------------------ inference
    def predict(self, x, batch_size=32, verbose=0):
        """The model's outputs as numpy (the loss head's: probabilities for softmax).

        Before compile (weights from :meth:`load_weights`) the bare network's
        outputs are returned.
        """
        data = self._data_dict(x)
        mod = self._get_module(data, batch_size, training=False)
        out = mod.predict(self._iter(data, None, batch_size), always_output_list=True)
        out = [o.asnumpy() for o in out]
        return out[0] if len(out) == 1 else out

    def _evaluate_arrays(self, x, y, batch_size):
        data = self._data_dict(x)
        n = len(next(iter(data.values())))
        label = self._label_array(y, n)
        pred = self.predict(data, batch_size)
        names = []
        for m in [LossMetric(self.loss_kind)] + self._compiled['metrics']:
            m.reset()
            m.update([label], [pred])
            names += m.get_name_value()
        return names

    def evaluate(self, x, y, batch_size=32, verbose=0, return_dict=False):
        """Loss and metrics on ``(x, y)``, computed once over all samples (no padding).

        Returns
        -------
        float, list of float or dict
            The loss alone when no metric was compiled, else
            ``[loss, metric...]`` in :attr:`metrics_names` order, or a dict.
        """
        self._need_compiled('evaluate')
        values = self._evaluate_arrays(x, y, batch_size)
        if verbose:
            print(' - '.join('%s: %.4f' % kv for kv in values), flush=True)
        if return_dict:
            return dict(values)
        return values[0][1] if len(values) == 1 else [v for _, v in values]

    # ------------------------------------------------------------ weights
    def get_weights(self):
        """``{name: numpy array}`` of every argument and auxiliary state."""
        arg, aux = self._params('get_weights')
        return {k: v.asnumpy() for k, v in list(arg.items()) + list(aux.items())}

    def _params(self, what):
        if self._module is not None and self._module.params_initialized:
            return self._module.get_params()
        if self._pending is not None:
            return self._pending
        raise FFError('%s: %s needs weights; call fit() or load_weights() first.'
                      % (self._display_name(), what))

    def save_weights(self, prefix, epoch=0):
        """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` (ff.model.save_checkpoint).

        ``ff.model.load_checkpoint(prefix, epoch)`` and ``ff.mod.Module.load``
        read them back; the symbol has the loss head when compiled.
        """
        from ..checkpoint import save_checkpoint
        arg, aux = self._params('save_weights')
        sym = self.to_symbol(with_loss=self._compiled is not None)
        save_checkpoint(prefix, epoch, sym, arg, aux)

    def load_weights(self, prefix, epoch=0):
        """Read weights saved by :meth:`save_weights` or ``ff.model.save_checkpoint``.

        Raises
        ------
        ParamError
            When the file lacks a weight of this model (names them).
        """
        from ..checkpoint import load_checkpoint
        _, arg, aux = load_checkpoint(prefix, epoch)
        sym = self.to_symbol(with_loss=False)
        inputs = set(self._input_names())
        need = [a for a in sym.list_arguments() if a not in inputs]
        missing = [a for a in need if a not in arg] + \
            [a for a in sym.list_auxiliary_states() if a not in aux]
        if missing:
            raise ParamError('%s: load_weights: %s-%04d.params lacks %s'
                             % (self._display_name(), prefix, epoch, ', '.join(missing)))
        arg = {k: arg[k] for k in need}
        if self._module is not None and self._module.params_initialized:
            self._module.set_params(arg, aux)
        else:
            self._pending = (arg, aux)
