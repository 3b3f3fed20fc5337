"""compile / fit for Keras-style models, over :class:`ffnumba.mod.Module`.

``fit`` drives a :class:`~ffnumba.mod.Module` through the steps
``Module.fit`` is made of (``bind``, ``init_params``, ``init_optimizer``,
then per batch ``forward_backward`` and ``update``), and calls Keras'
callback hooks between them: Keras semantics (batch-begin hooks,
``stop_training`` within an epoch, ``steps_per_epoch``, per-sample weights,
``validation_freq``) need a hook at every step, which ``Module.fit``'s
batch-end/epoch-end callbacks do not give. No kernel or update rule is
added: gradients, optimizers, kvstores and multi-device splitting are the
Module's.

Batches: ``batch_size`` samples in order (reshuffled every epoch with
``shuffle=True``); the last partial batch is padded to the bound batch size
with weight-0 rows, and its real rows' weights are scaled by
``batch_size / m`` so that its gradient is the mean over its ``m`` samples,
as in Keras (BatchNorm's batch statistics do see the padding rows).
Losses: :mod:`ffnumba.layers.losses`.
"""
import math
import warnings

import numpy as np

from ..base import FFError, ParamError
from .. import initializer as init
from .. import metric as M
from .. import optimizer as opt
from . import callbacks as C
from .evaluation import EvaluationMixin, _check_batch_size
from .losses import LOSSES, LossMetric, MeanMetric, OutputSpec, _Accumulator, check_loss

__all__ = ['TrainingMixin', 'LOSSES', 'LossMetric']

_METRICS = {'acc': 'acc', 'accuracy': 'acc', 'mse': 'mse', 'mae': 'mae', 'rmse': 'rmse',
            'ce': 'ce', 'cross_entropy': 'ce', 'crossentropy': 'ce', 'f1': 'f1',
            'top_k_accuracy': 'top_k_accuracy', 'perplexity': 'perplexity'}


def _make_metric(m):
    if isinstance(m, M.EvalMetric):
        return m
    if isinstance(m, str) and m.lower() in ('mse', 'mae', 'rmse', 'mean_squared_error',
                                            'mean_absolute_error'):
        return MeanMetric({'mean_squared_error': 'mse', 'mean_absolute_error': 'mae'}.get(
            m.lower(), m.lower()))
    if isinstance(m, str) and m.lower() in _METRICS:
        return M.create(_METRICS[m.lower()])
    if callable(m):
        return M.create(m)
    raise ParamError('compile: `metrics` entries must be one of %s, an EvalMetric or a '
                     'function. Received: %r' % (', '.join(repr(k) for k in sorted(_METRICS)), m))


def _per_output(value, names, what, default):
    """``value`` for each output: one value for all, a list in output order or a dict by name."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ParamError('compile: `%s` keys must be output names %r. Received: %r'
                             % (what, names, unknown))
        return [value.get(n, default) for n in names]
    if isinstance(value, (list, tuple)) and what != 'metrics':
        if len(value) != len(names):
            raise ParamError('compile: `%s` must have one entry per output (%d: %r). '
                             'Received: %r' % (what, len(names), names, value))
        return list(value)
    return [value] * len(names)


class _RunningMetric(M.EvalMetric):
    """What MXNet batch callbacks (Speedometer) see as ``eval_metric``: the running logs."""

    def __init__(self, fit):
        super().__init__('keras-logs')
        self._fit = fit

    def get_name_value(self):
        return list(self._fit.logs().items())

    get_global_name_value = get_name_value

    def reset(self):
        pass     # the epoch means belong to fit; Speedometer's auto_reset must not clear them


class TrainingMixin(EvaluationMixin):
    """Keras-style compile and fit over :class:`ffnumba.mod.Module` (mixed into Model)."""

    def _init_training(self):
        self._compiled = None
        self._module = None
        self._fixed = None
        self._seen_shapes = {}
        self._pending = None
        self._pending_states = None
        self._train_metric = None
        self.history = None
        self.stop_training = False

    # ------------------------------------------------------------ compile
    def compile(self, optimizer='rmsprop', loss=None, loss_weights=None, metrics=None,
                ctx=None, initializer=None, kvstore='local', learning_rate=None,
                **optimizer_params):
        """Choose the optimizer, the loss head(s), the metrics and the devices.

        Parameters
        ----------
        optimizer : str or Optimizer, default 'rmsprop'
            A registered name ('sgd', 'adam', 'rmsprop', ...) or an instance.
        loss : str, list or dict
            A key of :data:`LOSSES`; with several outputs one for all, a list in
            output order or a dict by output layer name.
        loss_weights : list or dict of float, optional
            Per output; the total ``loss`` is ``sum(w_k * loss_k)``.
        metrics : list, list of lists or dict, optional
            Names ('acc'/'accuracy', 'mse', 'mae', 'rmse', 'ce', 'f1', ...),
            EvalMetric instances or functions ``f(label, pred)``. A flat list
            applies to every output; a dict maps output names to lists.
            Metrics are not weighted by ``sample_weight`` (Keras' ``metrics``).
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
            For an unknown loss, metric or optimizer, or per-output values that
            do not match the outputs.
        """
        names = self.output_names
        losses = [check_loss(v) for v in _per_output(loss, names, 'loss', None)]
        weights = _per_output(1.0 if loss_weights is None else loss_weights, names,
                              'loss_weights', 1.0)
        if isinstance(metrics, dict):
            per = _per_output(metrics, names, 'metrics', [])
        elif isinstance(metrics, (list, tuple)) and metrics and all(
                isinstance(m, (list, tuple)) for m in metrics):
            if len(metrics) != len(names):
                raise ParamError('compile: `metrics` as a list of lists needs one list per '
                                 'output (%d). Received: %d' % (len(names), len(metrics)))
            per = list(metrics)
        else:
            per = [metrics] * len(names)
        per = [[] if m is None else list(m) if isinstance(m, (list, tuple)) else [m]
               for m in per]
        if len(names) > 1 and any(isinstance(m, M.EvalMetric) for lst in per for m in lst
                                  if per.count(lst) > 1):
            raise ParamError('compile: an EvalMetric instance cannot be shared by several '
                             'outputs; give metric names or a dict per output.')
        specs = [OutputSpec(n, lo, w, [_make_metric(m) for m in ms], len(names) == 1)
                 for n, lo, w, ms in zip(names, losses, weights, per)]
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
        if ctx is None:
            from ..context import cpu
            ctx = [cpu(0)]
        ctx = list(ctx) if isinstance(ctx, (list, tuple)) else [ctx]
        self._compiled = dict(loss=loss, loss_weights=loss_weights, metrics=metrics,
                              specs=specs, optimizer=optimizer,
                              optimizer_params=dict(optimizer_params), ctx=ctx,
                              kvstore=kvstore,
                              initializer=initializer or init.Xavier('uniform', 'avg', 3))
        if self._module is not None and self._module.params_initialized:
            self._pending = self._module.get_params()
        self._module = None

    @property
    def _specs(self):
        return self._need_compiled('the loss')['specs']

    @property
    def loss_kind(self):
        """'softmax', 'onehot', 'mse', 'mae' or 'logistic' (the first output's loss)."""
        return self._specs[0].kind

    @property
    def label_name(self):
        """The label argument of the (first) loss head (``'softmax_label'``, ...)."""
        return self._specs[0].label_name

    @property
    def metrics_names(self):
        """Keys of :meth:`evaluate`'s values, in its order (``['loss', 'accuracy']``)."""
        acc = _Accumulator(self._specs)
        return list(acc.logs())

    def _need_compiled(self, what):
        if self._compiled is None:
            raise FFError('%s: %s needs compile() first.' % (self._display_name(), what))
        return self._compiled

    def _loss_head(self, outputs, logits, weighted=False):
        from .. import symbol as S
        specs = self._need_compiled('to_symbol(with_loss=True)')['specs']
        heads = [s.head_symbol(o, lg, weighted) for s, o, lg in zip(specs, outputs, logits)]
        return heads[0] if len(heads) == 1 else S.Group(heads)

    def _train_symbol(self):
        outputs, logits, _, _ = self._build()
        return self._loss_head(outputs, logits, weighted=True)

    # ------------------------------------------------------------ optimizer access
    def _live_optimizer(self):
        mod = self._module
        if mod is None or not mod.optimizer_initialized:
            return None
        updater = mod._updater or getattr(mod._kvstore, '_updater', None)
        return updater.optimizer if updater is not None else mod._optimizer

    @property
    def learning_rate(self):
        """The optimizer's current learning rate (settable, also between epochs)."""
        live = self._live_optimizer()
        if live is not None:
            return float(live.learning_rate)
        cfg = self._need_compiled('learning_rate')
        if isinstance(cfg['optimizer'], opt.Optimizer):
            return float(cfg['optimizer'].learning_rate)
        return float(cfg['optimizer_params'].get(
            'learning_rate', opt.create(cfg['optimizer']).learning_rate))

    @learning_rate.setter
    def learning_rate(self, value):
        live = self._live_optimizer()
        if live is not None:
            live.set_learning_rate(float(value))
            return
        cfg = self._need_compiled('learning_rate')
        if isinstance(cfg['optimizer'], opt.Optimizer):
            cfg['optimizer'].set_learning_rate(float(value))
        else:
            cfg['optimizer_params']['learning_rate'] = float(value)

    # ------------------------------------------------------------ module
    def _frozen_names(self):
        _, _, records, _ = self._build()
        return sorted(n for layer, name, _ in records if not getattr(layer, 'trainable', True)
                      for n in layer.param_names(name)[0])

    def _train_module(self, data, labels, weights, bs):
        """The Module bound for training at batch ``bs``, weights and optimizer ready."""
        from ..module import Module
        cfg = self._compiled
        fixed = self._frozen_names()
        mod = self._module
        if mod is not None and (not mod.binded or not mod.for_training or self._fixed != fixed
                                or mod._data_shapes[0].shape[0] != bs):
            if mod.params_initialized:
                self._pending = mod.get_params()
            if mod.optimizer_initialized and self._pending_states is None:
                self._pending_states = self._optimizer_states()
            mod = self._module = None
        if mod is None:
            mod = self._module = Module(self._train_symbol(), data_names=self._input_names(),
                                        label_names=self._label_names(),
                                        context=cfg['ctx'], fixed_param_names=fixed)
            self._fixed = fixed
            mod.bind([(k, (bs,) + v.shape[1:]) for k, v in data.items()],
                     self._label_descs(labels, weights, bs), for_training=True)
        if not mod.params_initialized or self._pending is not None:
            arg, aux = self._pending or (None, None)
            with warnings.catch_warnings():
                warnings.filterwarnings('ignore', message='Parameters already initialized')
                mod.init_params(initializer=cfg['initializer'], arg_params=arg,
                                aux_params=aux, force_init=arg is not None)
            self._pending = None
        if not mod.optimizer_initialized:
            mod.init_optimizer(kvstore=cfg['kvstore'], optimizer=cfg['optimizer'],
                               optimizer_params=cfg['optimizer_params'])
            if self._pending_states is not None:
                self._set_optimizer_states(self._pending_states)
                self._pending_states = None
        return mod

    def _label_names(self):
        return [s.label_name for s in self._specs] + [s.weight_name for s in self._specs]

    def _label_descs(self, labels, weights, bs):
        shapes = [(bs,) + a.shape[1:] for a in labels]
        shapes += [self._weight_shape(i, bs) for i in range(len(self._specs))]
        return list(zip(self._label_names(), shapes))

    def _weight_shape(self, i, bs):
        """The shape of output ``i``'s head input (the per-sample weight is broadcast to it)."""
        key = ('wshape', i)
        if key not in self._seen_shapes:
            outputs, logits, _, _ = self._build()
            spec, data = self._specs[i], outputs[i]
            lg = logits[i]
            if lg is not None and lg[0] == {'softmax': 'softmax', 'onehot': 'softmax',
                                             'logistic': 'sigmoid'}.get(spec.kind):
                data = lg[1]
            shapes = {k: (1,) + tuple(v) for k, v in self._input_shapes().items()}
            self._seen_shapes[key] = tuple(data.infer_shape(**shapes)[1][0][1:])
        return (bs,) + self._seen_shapes[key]

    # ------------------------------------------------------------ fit
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose='auto', callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None,
            validation_batch_size=None, validation_freq=1):
        """Train; return the :class:`~ffnumba.layers.callbacks.History` (Keras' ``fit``).

        Parameters
        ----------
        x : array, list or dict of arrays
            Samples along axis 0 (one array per input), checked against the
            declared ``L.Input`` shapes.
        y : array, list or dict of arrays
            Class indices (softmax losses; one-hot for categorical_crossentropy)
            or targets shaped like the output; one per output.
        batch_size : int, default 32
        epochs : int, default 1
            The epoch to stop before: with ``initial_epoch=k`` training runs
            ``epochs - k`` epochs (Keras).
        verbose : 'auto', 0, 1 or 2, default 'auto' (1)
            1: a live progress bar per epoch (tqdm, on a terminal; a line per
            epoch otherwise); 2: one line per epoch; 0: silent.
        callbacks : list, optional
            :mod:`ffnumba.layers.callbacks` objects, objects with hook methods,
            or MXNet callables (``ff.callback.Speedometer(...)`` after each
            batch; ``ff.callback.do_checkpoint(prefix)`` after each epoch).
        validation_split : float in [0, 1), default 0
            Hold out the LAST fraction of the samples (before shuffling);
            ignored when ``validation_data`` is given.
        validation_data : (x_val, y_val) or (x_val, y_val, sample_weight_val)
        shuffle : bool, default True
            Reshuffle the training samples every epoch.
        class_weight : dict, optional
            ``{class index: weight}``: each sample's loss weight is its class's
            (one output only; not together with ``sample_weight``).
        sample_weight : array (n,) or list/dict per output, optional
            Per-sample loss weights: batch loss ``sum(w_i l_i) / n``.
        initial_epoch : int, default 0
            The epoch to start at (epoch numbers in logs and callbacks).
        steps_per_epoch : int, optional
            Batches per epoch; batches continue across epochs, and a new
            (reshuffled) pass starts when the samples run out.
        validation_batch_size : int, optional
            Default ``batch_size``.
        validation_freq : int or collection of int, default 1
            Validate after epochs where ``(epoch + 1) % validation_freq == 0``,
            or whose 1-based number is in the collection.

        Returns
        -------
        History
            ``history.history['loss'|'accuracy'|'val_loss'|...]``: one value per
            epoch; training values are sample means over the epoch's batches.

        Raises
        ------
        ParamError, ShapeError
            For bad arguments, or data that do not match the declared inputs.
        """
        self._need_compiled('fit')
        bs = _check_batch_size('fit', 32 if batch_size is None else batch_size)
        verbose = 1 if verbose == 'auto' else verbose
        if verbose not in (0, 1, 2):
            raise ParamError("fit: `verbose` must be 'auto', 0, 1 or 2. Received: verbose=%r"
                             % (verbose,))
        for field, value in (('epochs', epochs), ('initial_epoch', initial_epoch)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ParamError('fit: `%s` must be an int >= 0. Received: %s=%r'
                                 % (field, field, value))
        data, labels, weights = self._prepare(x, y, sample_weight, class_weight, 'fit')
        n = len(next(iter(data.values())))
        val = None
        if validation_data is not None:
            val = self._validation_tuple(validation_data)
        elif validation_split:
            if not 0 < validation_split < 1:
                raise ParamError('fit: `validation_split` must be a float in [0, 1). '
                                 'Received: validation_split=%r' % (validation_split,))
            split_at = int(math.floor(n * (1.0 - validation_split)))
            if split_at in (0, n):
                raise ParamError('fit: training data contains %d samples, which is not '
                                 'sufficient to split it into a validation and training set '
                                 'as specified by `validation_split=%r`.' % (n, validation_split))
            val = ({k: v[split_at:] for k, v in data.items()}, [a[split_at:] for a in labels],
                   [w[split_at:] for w in weights])
            data = {k: v[:split_at] for k, v in data.items()}
            labels = [a[:split_at] for a in labels]
            weights = [w[:split_at] for w in weights]
            n = split_at
        if n == 0:
            raise ParamError('fit: `x` holds no samples.')
        bs = min(bs, n)       # a batch larger than the data would only be padding
        if steps_per_epoch is not None:
            _check_batch_size('fit', steps_per_epoch, 'steps_per_epoch')
        steps = steps_per_epoch or int(math.ceil(n / bs))
        mod = self._train_module(data, labels, weights, bs)
        history = C.History()
        cbs = list(callbacks or ()) + [history]     # Keras: History after the user's
        if verbose:
            cbs.append(C.ProgbarLogger(verbose))
        cbs = C.CallbackList(cbs, self, {'verbose': verbose, 'epochs': epochs, 'steps': steps})
        self.stop_training = False
        self._fit_loop(mod, cbs, data, labels, weights, val, bs, n, steps, epochs, initial_epoch,
                       shuffle, validation_batch_size or bs, validation_freq,
                       steps_per_epoch is not None)
        self.history = history
        return history

    def _fit_loop(self, mod, cbs, data, labels, weights, val, bs, n, steps, epochs,
                  initial_epoch, shuffle, val_bs, validation_freq, carry):
        from ..random import generator
        rng = generator()
        order, pos = None, n
        epoch_logs = {}
        cbs.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch)
            acc = _Accumulator(self._specs)
            self._train_metric = _RunningMetric(acc)
            if not carry:
                pos = n
            for step in range(steps):
                if pos >= n:
                    order = rng.permutation(n) if shuffle else np.arange(n)
                    pos = 0
                idx = order[pos:pos + bs]
                pos += bs
                cbs.on_train_batch_begin(step)
                batch, real = self._make_batch(data, labels, weights, idx, bs, training=True)
                mod.forward_backward(batch)
                mod.update()
                outs = [o.asnumpy()[:real] for o in mod.get_outputs()]
                acc.update([a[idx] for a in labels], outs, [w[idx] for w in weights])
                cbs.on_train_batch_end(step, acc.logs())
                if self.stop_training:
                    break
            epoch_logs = acc.logs()
            if val is not None and _should_validate(epoch, validation_freq):
                val_logs = self._evaluate_prepared(*val, val_bs, cbs)
                epoch_logs.update({'val_' + k: v for k, v in val_logs.items()})
            cbs.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        cbs.on_train_end(epoch_logs)

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """One gradient step on one batch; return its loss (and metrics), Keras style.

        Returns
        -------
        float, list or dict
            As :meth:`evaluate`, for this batch (computed before the update's
            effect, from the forward pass that produced the gradient).
        """
        self._need_compiled('train_on_batch')
        data, labels, weights = self._prepare(x, y, sample_weight, class_weight,
                                              'train_on_batch')
        n = len(next(iter(data.values())))
        mod = self._train_module(data, labels, weights, n)
        acc = _Accumulator(self._specs)
        batch, real = self._make_batch(data, labels, weights, np.arange(n), n, training=True)
        mod.forward_backward(batch)
        mod.update()
        acc.update(labels, [o.asnumpy()[:real] for o in mod.get_outputs()], weights)
        return self._format_logs(acc.logs(), return_dict)


def _should_validate(epoch, freq):
    if isinstance(freq, (int, np.integer)) and not isinstance(freq, bool):
        if freq < 1:
            raise ParamError('fit: `validation_freq` must be a positive int or a collection '
                             'of epochs. Received: validation_freq=%r' % (freq,))
        return (epoch + 1) % freq == 0
    try:
        return (epoch + 1) in freq
    except TypeError:
        raise ParamError('fit: `validation_freq` must be a positive int or a collection of '
                         'epochs. Received: validation_freq=%r' % (freq,)) from None
