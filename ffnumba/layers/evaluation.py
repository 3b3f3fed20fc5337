"""Data checks, evaluate / predict and the ``*_on_batch`` methods of Keras-style models.

Inference runs the model's :class:`ffnumba.mod.Module` (``forward`` with
``is_train=False``) batch by batch; a last partial batch is padded to the
bound batch size and the padding rows are dropped from the results, so
every value is computed over exactly the given samples.
"""
import numbers

import numpy as np

from ..base import ParamError, ShapeError
from .losses import _Accumulator, onehot_hint

__all__ = ['EvaluationMixin']


def _check_batch_size(where, value, field='batch_size'):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ParamError('%s: `%s` must be a positive int. Received: %s=%r'
                         % (where, field, field, value))
    return int(value)


def _layout_hint(want, got):
    """A sentence naming the transpose when ``got`` is ``want`` in the other channel layout."""
    want, got, k = tuple(want), tuple(got), len(want)
    if k < 2 or want == got or sorted(want) != sorted(got):
        return ''
    if got == want[1:] + (want[0],):
        return (' The data look channels-last (..., channels), this input is channels-first '
                '(channels, ...): transpose with x.transpose(0, %d, %s), or build the model '
                "with data_format='channels_last' layers and L.Input(shape=%r)."
                % (k, ', '.join(str(i) for i in range(1, k)), got))
    if got == (want[-1],) + want[:-1]:
        return (' The data look channels-first (channels, ...), this input is channels-last '
                '(..., channels): transpose with x.transpose(0, %s, 1).'
                % ', '.join(str(i) for i in range(2, k + 1)))
    return ''


class EvaluationMixin:
    """Data preparation and inference for :class:`~ffnumba.layers.Model`."""

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
        declared = {name: t.shape for name, t in zip(names, self._inputs)}
        out, n = {}, None
        for name in names:
            a = np.asarray(arrays[name], dtype=np.float32)
            if a.ndim < 1:
                raise ParamError('%s: input %r must have a batch axis. Received shape %s'
                                 % (self._display_name(), name, a.shape))
            want = declared[name]
            if want is not None and tuple(a.shape[1:]) != tuple(want):
                raise ShapeError('%s: input %r expects data of shape (None, %s) (declared by '
                                 'L.Input / input_shape). Received data of shape %r.%s'
                                 % (self._display_name(), name, ', '.join(map(str, want)),
                                    a.shape, _layout_hint(want, a.shape[1:])))
            if n is not None and len(a) != n:
                raise ParamError('%s: all inputs need the same number of samples. Received '
                                 '%d and %d' % (self._display_name(), n, len(a)))
            n = len(a)
            out[name] = a
            self._seen_shapes[name] = a.shape[1:]
        return out

    def _per_output_arrays(self, value, what):
        names = self.output_names
        if isinstance(value, dict):
            if sorted(value) != sorted(names):
                raise ParamError('%s: `%s` keys must be the outputs %r. Received: %r'
                                 % (self._display_name(), what, names, sorted(value)))
            return [value[k] for k in names]
        if isinstance(value, (list, tuple)) and len(names) > 1:
            if len(value) != len(names):
                raise ParamError('%s: `%s` must hold %d arrays (outputs %r). Received: %d'
                                 % (self._display_name(), what, len(names), names, len(value)))
            return list(value)
        return [value] * len(names) if what == 'sample_weight' else [value]

    def _label_array(self, spec, y, n, i):
        y = np.asarray(y)
        if y.ndim == 0 or y.shape[0] != n:
            raise ParamError('%s: `y` must have one row per sample (%d). Received shape %s'
                             % (self._display_name(), n, y.shape))
        err = onehot_hint(spec.kind, y, n)
        if err is not None:
            raise err
        if spec.kind == 'onehot' and y.ndim == 2:
            y = y.argmax(axis=1)
        if spec.kind in ('softmax', 'onehot'):
            return y.reshape(n).astype(np.float32)
        out = self.to_symbol(with_loss=False)
        shapes = {k: (1,) + tuple(v) for k, v in self._input_shapes().items()}
        oshape = out.infer_shape(**shapes)[1][i][1:]
        if y.size != n * int(np.prod(oshape)):
            raise ParamError('%s: `y` must match the output shape (None, %s). Received '
                             'shape %s' % (self._display_name(),
                                           ', '.join(map(str, oshape)), y.shape))
        return y.reshape((n,) + tuple(oshape)).astype(np.float32)

    def _prepare(self, x, y, sample_weight, class_weight, where):
        """``(data, labels, weights)``: input dict, a label array and an (n,) weight per output."""
        if y is None:
            raise ParamError('%s: `y` is required (labels or targets).' % where)
        data = self._data_dict(x)
        n = len(next(iter(data.values())))
        specs = self._specs
        labels = [self._label_array(s, v, n, i) for i, (s, v) in
                  enumerate(zip(specs, self._per_output_arrays(y, 'y')))]
        if class_weight is not None and sample_weight is not None:
            raise ParamError('%s: you cannot give `class_weight` and `sample_weight` at the '
                             'same time.' % where)
        if class_weight is not None:
            if len(specs) > 1 or specs[0].kind not in ('softmax', 'onehot', 'logistic'):
                raise ParamError('%s: `class_weight` needs one classification output '
                                 '(use sample_weight otherwise).' % where)
            if not isinstance(class_weight, dict):
                raise ParamError('%s: `class_weight` must be a dict {class index: weight}. '
                                 'Received: %r' % (where, class_weight))
            cls = labels[0].reshape(n).astype(np.int64) if labels[0].size == n else None
            if cls is None:
                raise ParamError('%s: `class_weight` needs one class per sample.' % where)
            missing = sorted(set(np.unique(cls).tolist()) - set(int(k) for k in class_weight))
            if missing:
                raise ParamError('%s: `class_weight` lacks classes %s present in `y`.'
                                 % (where, missing))
            table = {int(k): float(v) for k, v in class_weight.items()}
            weights = [np.array([table[c] for c in cls], np.float32)]
        elif sample_weight is not None:
            weights = []
            for w in self._per_output_arrays(sample_weight, 'sample_weight'):
                w = np.ones(n, np.float32) if w is None else np.asarray(w, np.float32)
                if w.shape != (n,):
                    raise ParamError('%s: `sample_weight` must have shape (%d,) (one weight '
                                     'per sample). Received shape %s' % (where, n, w.shape))
                weights.append(w)
        else:
            weights = [np.ones(n, np.float32) for _ in specs]
        return data, labels, weights

    def _validation_tuple(self, vd):
        if not isinstance(vd, (tuple, list)) or len(vd) not in (2, 3):
            raise ParamError('fit: `validation_data` must be (x_val, y_val) or (x_val, y_val, '
                             'sample_weight_val).')
        return self._prepare(vd[0], vd[1], vd[2] if len(vd) == 3 else None, None, 'fit')

    def _make_batch(self, data, labels, weights, idx, bs, training):
        """A DataBatch of rows ``idx`` padded to ``bs`` (weight-0 padding); and the real count."""
        from .. import ndarray as nd
        from ..io import DataBatch
        real = len(idx)
        full = np.concatenate([idx, np.resize(idx, bs - real)]) if real < bs else idx
        batch_data = [nd.array(v[full]) for v in data.values()]
        if not training:
            return DataBatch(batch_data, None, pad=bs - real), real
        batch_label = [nd.array(a[full]) for a in labels]
        for i, w in enumerate(weights):
            scaled = np.zeros(bs, np.float32)
            scaled[:real] = w[idx] * (bs / real)
            shape = self._weight_shape(i, bs)
            full_w = np.broadcast_to(scaled.reshape((bs,) + (1,) * (len(shape) - 1)), shape)
            batch_label.append(nd.array(np.ascontiguousarray(full_w)))
        return DataBatch(batch_data, batch_label, pad=bs - real), real

    # ------------------------------------------------------------ inference module
    def _infer_module(self, data, bs):
        from ..base import FFError
        from ..module import Module
        mod = self._module
        if mod is not None and mod.binded and mod.params_initialized:
            if self._pending is not None:
                mod.set_params(*self._pending)
                self._pending = None
            return mod, min(bs, len(next(iter(data.values()))))
        if self._pending is None:
            raise FFError('%s: no weights yet; call fit() or load_weights() first.'
                          % self._display_name())
        if self._compiled is not None:
            sym, labels = self._train_symbol(), self._label_names()
            ctx = self._compiled['ctx']
        else:
            sym, labels, ctx = self.to_symbol(with_loss=False), None, None
        mod = self._module = Module(sym, data_names=self._input_names(), label_names=labels,
                                    context=ctx)
        bs = min(bs, len(next(iter(data.values()))))
        mod.bind([(k, (bs,) + v.shape[1:]) for k, v in data.items()], for_training=False)
        mod.set_params(*self._pending)
        self._pending = None
        return mod, bs

    def _forward_all(self, data, bs, on_begin=None, on_end=None):
        """Yield ``(batch index, rows, [outputs])`` over all samples in order."""
        mod, bound = self._infer_module(data, bs)
        n = len(next(iter(data.values())))
        for k, start in enumerate(range(0, n, bound)):
            idx = np.arange(start, min(start + bound, n))
            if on_begin is not None:
                on_begin(k)
            batch, real = self._make_batch(data, None, (), idx, bound, training=False)
            mod.forward(batch, is_train=False)
            yield k, idx, [o.asnumpy()[:real] for o in mod.get_outputs()]

    def _evaluate_prepared(self, data, labels, weights, bs, cbs=None):
        acc = _Accumulator(self._specs)
        if cbs is not None:
            cbs.on_test_begin()
        begin = cbs.on_test_batch_begin if cbs is not None else None
        parts = None
        for k, idx, outs in self._forward_all(data, bs, begin):
            parts = [[] for _ in outs] if parts is None else parts
            for p, o in zip(parts, outs):
                p.append(o)
            if cbs is not None:
                acc.update([a[idx] for a in labels], outs, [w[idx] for w in weights])
                cbs.on_test_batch_end(k, acc.logs())
        # The values come from one update over all samples: MXNet metrics average per
        # update call, Keras' per sample.
        acc = _Accumulator(self._specs)
        acc.update(labels, [np.concatenate(p) for p in parts], weights)
        logs = acc.logs()
        if cbs is not None:
            cbs.on_test_end(logs)
        return logs

    def _format_logs(self, logs, return_dict):
        if return_dict:
            return dict(logs)
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def _callbacks(self, callbacks, verbose, steps):
        from . import callbacks as C
        return C.CallbackList(list(callbacks or ()), self,
                              {'verbose': verbose, 'epochs': 1, 'steps': steps})

    # ------------------------------------------------------------ public
    def evaluate(self, x=None, y=None, batch_size=None, verbose='auto', sample_weight=None,
                 steps=None, callbacks=None, return_dict=False):
        """Loss and metrics on ``(x, y)``, over exactly the given samples (Keras' ``evaluate``).

        Parameters
        ----------
        x, y : as in :meth:`fit`
        batch_size : int, default 32
        verbose : 'auto', 0 or 1
            Non-zero prints the values on one line.
        sample_weight : array (n,) or list/dict per output, optional
            Weights the loss as in :meth:`fit` (``sum(w_i l_i) / n``).
        steps : int, optional
            Evaluate the first ``steps`` batches only.
        callbacks : list, optional
            Their ``on_test_*`` hooks are called.
        return_dict : bool, default False

        Returns
        -------
        float, list of float or dict
            The loss alone when no metric was compiled, else values in
            :attr:`metrics_names` order, or a dict.
        """
        self._need_compiled('evaluate')
        bs = _check_batch_size('evaluate', 32 if batch_size is None else batch_size)
        data, labels, weights = self._prepare(x, y, sample_weight, None, 'evaluate')
        if steps is not None:
            keep = _check_batch_size('evaluate', steps, 'steps') * bs
            data = {k: v[:keep] for k, v in data.items()}
            labels, weights = [a[:keep] for a in labels], [w[:keep] for w in weights]
        n = len(next(iter(data.values())))
        cbs = self._callbacks(callbacks, verbose, -(-n // bs))
        logs = self._evaluate_prepared(data, labels, weights, bs, cbs)
        if verbose:
            print(' - '.join('%s: %.4f' % kv for kv in logs.items()), flush=True)
        return self._format_logs(logs, return_dict)

    def predict(self, x, batch_size=None, verbose='auto', steps=None, callbacks=None):
        """The model's outputs as numpy (the loss heads': probabilities for softmax).

        Before compile (weights from :meth:`load_weights`) the bare network's
        outputs are returned. Several outputs give a list.
        """
        bs = _check_batch_size('predict', 32 if batch_size is None else batch_size)
        data = self._data_dict(x)
        if steps is not None:
            keep = _check_batch_size('predict', steps, 'steps') * bs
            data = {k: v[:keep] for k, v in data.items()}
        n = len(next(iter(data.values())))
        cbs = self._callbacks(callbacks, 0, -(-n // bs))
        cbs.on_predict_begin()
        parts = None
        for k, _, outs in self._forward_all(data, bs, cbs.on_predict_batch_begin):
            parts = [[] for _ in outs] if parts is None else parts
            for p, o in zip(parts, outs):
                p.append(o)
            cbs.on_predict_batch_end(k, {'outputs': outs})
        cbs.on_predict_end()
        out = [np.concatenate(p) for p in parts]
        return out[0] if len(out) == 1 else out

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """Loss and metrics on one batch (no update), as :meth:`evaluate` returns them."""
        self._need_compiled('test_on_batch')
        data, labels, weights = self._prepare(x, y, sample_weight, None, 'test_on_batch')
        n = len(next(iter(data.values())))
        logs = self._evaluate_prepared(data, labels, weights, n)
        return self._format_logs(logs, return_dict)

    def predict_on_batch(self, x):
        """The outputs for one batch of samples (numpy, a list for several outputs)."""
        data = self._data_dict(x)
        return self.predict(data, batch_size=len(next(iter(data.values()))))
