"""Weights, configs and whole-model files of Keras-style models.

``model.save(path)`` writes one folder, atomically (a temporary folder
renamed into place), holding

- ``config.json``: the architecture (:meth:`Model.get_config`), the compile
  arguments and the sample shapes seen;
- ``model.params``: the weights in MXNet's ``.params`` format
  (``ff.nd.save`` with ``arg:<name>``/``aux:<name>`` keys, loadable by
  MXNet's ``mx.nd.load``);
- ``optimizer.states`` (after training): the optimizer's hyper-parameters,
  update counts and state arrays in ffnumba's safe ``.states`` format.

:func:`load_model` rebuilds the model, compiles it as it was and restores
the weights and the optimizer, so that ``fit`` continues exactly where the
saved model stopped. Nothing is pickled: every file is JSON or arrays.
"""
import json
import os
import shutil
import warnings

import numpy as np

from ..base import FFError, ParamError

__all__ = ['WeightsMixin']

_FORMAT = 'ffnumba.layers.model'
_VERSION = 1


class WeightsMixin:
    """get/set weights, weight files and whole-model saving (mixed into Model)."""

    # ------------------------------------------------------------ weights
    def _params(self, what):
        if self._module is not None and self._module.params_initialized:
            if self._pending is not None:
                self._module.set_params(*self._pending)
                self._pending = None
            return self._module.get_params()
        if self._pending is not None:
            return self._pending
        raise FFError('%s: %s needs weights; call fit() or load_weights() first.'
                      % (self._display_name(), what))

    def _weight_dict(self, what):
        arg, aux = self._params(what)
        return {k: v.asnumpy() for k, v in list(arg.items()) + list(aux.items())}

    @property
    def weight_names(self):
        """Names of the weights in :meth:`get_weights` order (layer by layer; arguments, then
        auxiliary states such as BatchNorm's moving mean and variance)."""
        names = []
        for layer, name in self._named_layers():
            args, aux = layer.param_names(name)
            names += args + aux
        return names

    def get_weights(self):
        """The weights as a list of numpy arrays, in :attr:`weight_names` order (Keras).

        ``dict(zip(model.weight_names, model.get_weights()))`` gives them by name.
        """
        weights = self._weight_dict('get_weights')
        return [weights[n] for n in self.weight_names]

    def set_weights(self, weights):
        """Set every weight from a list in :attr:`weight_names` order (or a dict by name).

        Raises
        ------
        ParamError
            For a wrong count, an unknown name or a shape that differs.
        """
        names = self.weight_names
        if isinstance(weights, dict):
            unknown = sorted(set(weights) - set(names))
            if unknown:
                raise ParamError('%s: set_weights: unknown weights %s'
                                 % (self._display_name(), ', '.join(unknown)))
            values = dict(weights)
        else:
            weights = list(weights)
            if len(weights) != len(names):
                raise ParamError('%s: set_weights needs %d arrays (%s). Received: %d'
                                 % (self._display_name(), len(names), ', '.join(names),
                                    len(weights)))
            values = dict(zip(names, weights))
        self._assign_weights(values)

    def _assign_weights(self, values):
        from .. import ndarray as nd
        try:
            arg, aux = self._params('set_weights')
        except FFError:
            arg, aux = None, None
        aux_names = set(self.to_symbol(with_loss=False).list_auxiliary_states())
        if arg is None:
            missing = sorted(set(self.weight_names) - set(values))
            if missing:
                raise ParamError('%s: set_weights before fit needs every weight; missing %s'
                                 % (self._display_name(), ', '.join(missing)))
            arg, aux = {}, {}
        else:
            arg, aux = dict(arg), dict(aux)
        for name, value in values.items():
            value = np.asarray(value, np.float32)
            table = aux if name in aux_names else arg
            if name in table and tuple(table[name].shape) != value.shape:
                raise ParamError('%s: weight %s has shape %s; received %s'
                                 % (self._display_name(), name, tuple(table[name].shape),
                                    value.shape))
            table[name] = nd.array(value)
        if self._module is not None and self._module.params_initialized:
            self._module.set_params(arg, aux)
        else:
            self._pending = (arg, aux)

    # ------------------------------------------------------------ weight files
    def save_weights(self, filepath, epoch=0):
        """Write the weights in MXNet's formats.

        A path ending in ``.params`` gets one ``ff.nd.save`` file with
        ``arg:``/``aux:`` keys (MXNet ``mx.nd.load`` reads it); any other path
        is a checkpoint prefix: ``prefix-symbol.json`` (the network, with the
        loss head when compiled) and ``prefix-%04d.params`` (``epoch``), which
        ``ff.model.load_checkpoint`` and ``ff.mod.Module.load`` read.
        """
        from .. import ndarray as nd
        from ..checkpoint import save_checkpoint
        arg, aux = self._params('save_weights')
        filepath = os.fspath(filepath)
        if filepath.endswith('.params'):
            data = {'arg:%s' % k: v for k, v in arg.items()}
            data.update({'aux:%s' % k: v for k, v in aux.items()})
            nd.save(filepath, data)
            return
        sym = self.to_symbol(with_loss=self._compiled is not None)
        save_checkpoint(filepath, epoch, sym, arg, aux)

    def load_weights(self, filepath, epoch=0):
        """Read weights written by :meth:`save_weights` (either form) or MXNet.

        Raises
        ------
        ParamError
            When the file lacks a weight of this model (names them).
        """
        from .. import ndarray as nd
        filepath = os.fspath(filepath)
        if filepath.endswith('.params'):
            loaded = nd.load(filepath)
            source = filepath
        else:
            source = '%s-%04d.params' % (filepath, epoch)
            loaded = nd.load(source)
        arg = {k[4:]: v for k, v in loaded.items() if k.startswith('arg:')}
        aux = {k[4:]: v for k, v in loaded.items() if k.startswith('aux:')}
        sym = self.to_symbol(with_loss=False)
        inputs = set(self._input_names())
        need = [a for a in sym.list_arguments() if a not in inputs]
        missing = [a for a in need if a not in arg] + \
            [a for a in sym.list_auxiliary_states() if a not in aux]
        if missing:
            raise ParamError('%s: load_weights: %s lacks %s'
                             % (self._display_name(), source, ', '.join(missing)))
        arg = {k: arg[k] for k in need}
        aux = {k: aux[k] for k in sym.list_auxiliary_states()}
        if self._module is not None and self._module.params_initialized:
            self._module.set_params(arg, aux)
        else:
            self._pending = (arg, aux)

    # ------------------------------------------------------------ optimizer states
    def _optimizer_states(self):
        mod = self._module
        updater = mod._updater or getattr(mod._kvstore, '_updater', None)
        if updater is None:
            raise FFError('%s: the optimizer states are not reachable' % self._display_name())
        return updater.get_states(dump_optimizer=True)

    def _set_optimizer_states(self, payload):
        mod = self._module
        updater = mod._updater or getattr(mod._kvstore, '_updater', None)
        rescale = mod._optimizer.rescale_grad      # 1 / batch size of this fit
        updater.set_states(payload)
        updater.optimizer.rescale_grad = rescale
        mod._optimizer = updater.optimizer
        if mod._kvstore is not None and getattr(mod._kvstore, '_updater', None) is updater:
            mod._kvstore._optimizer = updater.optimizer

    # ------------------------------------------------------------ whole model
    def _compile_config(self):
        from .. import optimizer as opt
        cfg = self._compiled
        if cfg is None:
            return None
        metrics = cfg['metrics']
        dropped = []

        def metric_cfg(m):
            if isinstance(m, str):
                return m
            conf = m.get_config() if hasattr(m, 'get_config') else {'metric': 'CustomMetric'}
            if conf.get('metric') == 'CustomMetric':
                dropped.append(m)
                return None
            return conf

        def walk(value):
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [walk(v) for v in value]
            return None if value is None else metric_cfg(value)

        walked = walk(metrics)
        if dropped:
            warnings.warn('%s.save: function metrics cannot be saved without code; the loaded '
                          'model will lack them.' % self._display_name(), stacklevel=3)
        optimizer = cfg['optimizer']
        if isinstance(optimizer, opt.Optimizer):
            from ..optimizer.updater import _optimizer_config
            optimizer = {'class': type(optimizer).__name__,
                         'state': _optimizer_config(optimizer)}
        return {'optimizer': optimizer, 'optimizer_params': cfg['optimizer_params'],
                'loss': cfg['loss'], 'loss_weights': cfg['loss_weights'], 'metrics': walked,
                'initializer': json.loads(cfg['initializer'].dumps()),
                'ctx': [[c.device_type, c.device_id] for c in cfg['ctx']],
                'kvstore': cfg['kvstore'] if isinstance(cfg['kvstore'], str) else 'local'}

    def save(self, filepath, overwrite=True, include_optimizer=True):
        """Write the whole model to the folder ``filepath`` (module docstring); atomic.

        Raises
        ------
        FFError
            When ``filepath`` exists and ``overwrite`` is False.
        """
        from .. import ndarray as nd
        from .. import checkpoint
        filepath = os.fspath(filepath).rstrip('/\\')
        if os.path.exists(filepath) and not overwrite:
            raise FFError('%s.save: %s exists (overwrite=False)' % (self._display_name(),
                                                                   filepath))
        arg, aux = self._params('save')
        doc = {'format': _FORMAT, 'version': _VERSION, 'model': self.get_config(),
               'compile': self._compile_config(),
               'input_shapes': {k: list(v) for k, v in self._seen_shapes.items()
                                if isinstance(k, str)}}
        tmp = '%s.tmp-%d' % (filepath, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            with open(os.path.join(tmp, 'config.json'), 'w') as f:
                json.dump(doc, f, indent=1, sort_keys=True)
            data = {'arg:%s' % k: v for k, v in arg.items()}
            data.update({'aux:%s' % k: v for k, v in aux.items()})
            nd.save(os.path.join(tmp, 'model.params'), data)
            mod = self._module
            states = os.path.join(tmp, 'optimizer.states')   # the one .states writer
            if include_optimizer and mod is not None and mod.optimizer_initialized:
                checkpoint.save_states(states, self._optimizer_states())
            elif include_optimizer and self._pending_states is not None:
                checkpoint.save_states(states, self._pending_states)
            old = None
            if os.path.exists(filepath):
                old = '%s.old-%d' % (filepath, os.getpid())
                shutil.rmtree(old, ignore_errors=True)
                os.replace(filepath, old)
            os.replace(tmp, filepath)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def to_json(self, **kwargs):
        """The architecture as JSON text (:func:`model_from_json` reads it)."""
        return json.dumps(self.get_config(), **kwargs)
