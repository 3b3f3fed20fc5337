"""Rebuilding ``ff.layers`` models from what :meth:`Model.save` wrote: config, weights, state.

:func:`load_model` reads the folder :class:`~ffnumba.layers.saving.WeightsMixin.save`
writes, rebuilds the model from its config, compiles it as it was and restores the
weights and the optimizer state; :func:`model_from_config` and :func:`model_from_json`
rebuild the architecture alone. (Kept apart from ``saving`` so that ``saving``, mixed
into :class:`Model`, does not import the model classes back.)
"""
import json
import os

from ..base import FFError, ParamError
from .saving import _FORMAT, _VERSION

__all__ = ['load_model', 'model_from_config', 'model_from_json']


def _metric_from_config(m):
    from .. import metric as M
    if isinstance(m, dict):
        m = dict(m)
        return M.create(m.pop('metric'), **m)
    return m


def _compile_from_config(model, cfg):
    from .. import context, initializer as init, optimizer as opt
    from ..optimizer.updater import _rebuild_optimizer
    optimizer = cfg['optimizer']
    if isinstance(optimizer, dict):
        optimizer = _rebuild_optimizer(optimizer['class'], optimizer['state'])

    def walk(value):
        if isinstance(value, dict) and 'metric' not in value:
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value if v is not None]
        return _metric_from_config(value)

    name, kwargs = cfg['initializer']
    ctx = [context.Context(t, i) for t, i in cfg['ctx']]
    params = dict(cfg['optimizer_params']) if not isinstance(optimizer, opt.Optimizer) else {}
    model.compile(optimizer=optimizer, loss=cfg['loss'], loss_weights=cfg['loss_weights'],
                  metrics=walk(cfg['metrics']), ctx=ctx, kvstore=cfg['kvstore'],
                  initializer=init.create(name, **kwargs), **params)


def model_from_config(config):
    """A new (untrained) model from :meth:`Model.get_config`'s dict."""
    from .model import Model, Sequential
    kinds = {'Sequential': Sequential, 'Model': Model}
    if not isinstance(config, dict) or config.get('class_name') not in kinds:
        raise ParamError("model_from_config: expected {'class_name': 'Sequential' or "
                         "'Model', 'config': {...}}. Received: %r" % (config,))
    return kinds[config['class_name']].from_config(config['config'])


def model_from_json(text):
    """A new (untrained) model from :meth:`Model.to_json`'s text."""
    return model_from_config(json.loads(text))


def load_model(filepath, compile=True):  # noqa: A002 (Keras' name)
    """Rebuild a model written by :meth:`Model.save`: architecture, compile, weights, optimizer.

    Parameters
    ----------
    filepath : str
        The folder.
    compile : bool, default True
        Compile as saved (optimizer states are restored at the next fit).

    Raises
    ------
    FFError
        For a missing folder or a file that is not an ffnumba model.
    """
    from .. import ndarray as nd
    filepath = os.fspath(filepath)
    cfg_path = os.path.join(filepath, 'config.json')
    if not os.path.isfile(cfg_path):
        raise FFError('load_model: %s is not a model folder written by Model.save (no '
                      'config.json)' % filepath)
    with open(cfg_path) as f:
        doc = json.load(f)
    if doc.get('format') != _FORMAT or doc.get('version') != _VERSION:
        raise FFError('load_model: %s: unknown format %r version %r'
                      % (cfg_path, doc.get('format'), doc.get('version')))
    model = model_from_config(doc['model'])
    model._seen_shapes.update({k: tuple(v) for k, v in doc.get('input_shapes', {}).items()})
    if compile and doc.get('compile') is not None:
        _compile_from_config(model, doc['compile'])
    loaded = nd.load(os.path.join(filepath, 'model.params'))
    model._pending = ({k[4:]: v for k, v in loaded.items() if k.startswith('arg:')},
                      {k[4:]: v for k, v in loaded.items() if k.startswith('aux:')})
    states = os.path.join(filepath, 'optimizer.states')
    if compile and os.path.isfile(states):   # the one .states reader (checkpoint)
        from .. import checkpoint
        model._pending_states = checkpoint.read_states(states, 'load_model')
    return model
