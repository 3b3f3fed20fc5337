"""``Updater``: lazy optimizer states per parameter and safe state files.

``get_states()`` writes the MXNet binary NDArray container (``nd.save``'s
format, :mod:`ffnumba.ndarray.params_io`) holding

* one array per state tensor, named ``state:<index>:<k>``;
* ``__ffnumba_states__``: a uint8 array holding a UTF-8 JSON document with
  the optimizer class, the nesting of each state (None / array / tuple), the
  per-index update counts, ``num_update`` and rule-wide scalars (Nadam's
  ``m_schedule``), and with ``dump_optimizer=True`` the optimizer's
  hyper-parameters (scheduler included), and ``checksum``: the SHA-256 of
  the rest of the document (canonical JSON) and of every state array's name,
  dtype, shape and bytes, so a flipped byte anywhere is detected on load.
  Files written before the checksum existed (no ``checksum`` entry) still load.

Nothing is pickled, so loading a state file cannot run code. MXNet's own
``.states`` files are pickles and are refused by :meth:`Updater.set_states`;
:func:`import_mxnet_states` converts the plain ones (indices -> NDArrays)
with an unpickler that allows only NDArrays and bytearrays.
"""
import hashlib
import io
import json
import pickle

import numpy as np

from ..base import FFError, ParamError, ShapeError
from ..ndarray.ndarray import NDArray, array
from ..ndarray import params_io
from ..registry import get_registry
from .. import lr_scheduler as _lrs
from . import _deferred
from .base import Optimizer, as_nd

__all__ = ['Updater', 'get_updater', 'import_mxnet_states', 'HEADER']

HEADER = '__ffnumba_states__'
_FORMAT = 'ffnumba.optimizer.states'
_HEADER_KEYS = {'format', 'version', 'optimizer', 'states', 'num_update', 'counts', 'extra',
                'optimizer_config', 'checksum', 'rng'}
_VERSION = 1
_PICKLE_MSG = (
    'optimizer states: %s is a Python pickle (MXNet writes .states files with pickle). '
    'ffnumba refuses to unpickle it, because unpickling data can run arbitrary code. '
    'If you trust the file, convert it with ff.optimizer.import_mxnet_states(data), which '
    'only accepts NDArrays, and pass the result to Updater.set_states.')


def _checksum(doc, arrays):
    """SHA-256 hex digest of ``doc`` (without its checksum) and of the state arrays."""
    h = hashlib.sha256()
    body = {k: v for k, v in doc.items() if k != 'checksum'}
    h.update(json.dumps(body, sort_keys=True).encode('utf-8'))
    for name in sorted(arrays):
        a = arrays[name]
        host = np.ascontiguousarray(a.asnumpy() if isinstance(a, NDArray) else a)
        h.update(('\0%s\0%s\0%s\0' % (name, host.dtype.str, host.shape)).encode('utf-8'))
        h.update(host.tobytes())
    return h.hexdigest()


# ------------------------------------------------------------ JSON values
def _enc(v):
    """JSON-able tagged form of plain Python values (int dict keys and tuples kept)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, tuple):
        return {'tuple': [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {'dict': [[_enc(k), _enc(x)] for k, x in v.items()]}
    if isinstance(v, _lrs.LRScheduler):
        return {'lr_scheduler': _enc(v.get_config())}
    raise TypeError(type(v).__name__)


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        if 'tuple' in v:
            return tuple(_dec(x) for x in v['tuple'])
        if 'dict' in v:
            return {_dec(k): _dec(x) for k, x in v['dict']}
        if 'lr_scheduler' in v:
            return _lrs.from_config(_dec(v['lr_scheduler']))
        raise ValueError('unknown tagged value %r' % sorted(v))
    return v


def _optimizer_config(opt):
    """The optimizer's JSON-able attributes (MXNet pickles the same, minus param_dict)."""
    out = {}
    for k, v in opt.__getstate__().items():
        if k == '_index_update_count':
            continue
        try:
            out[k] = _enc(v)
        except TypeError:
            pass  # not plain data (e.g. an object in param_dict): dropped, as MXNet drops it
    return out


def _rebuild_optimizer(name, config):
    reg = get_registry(Optimizer)
    klass = reg.get(name.lower())
    if klass is None or klass.__name__ != name:
        raise ParamError('optimizer states: unknown optimizer %r in the state file' % (name,))
    opt = klass.__new__(klass)
    opt.__setstate__({k: _dec(v) for k, v in config.items()})
    counts = opt.__dict__.setdefault('_all_index_update_counts', {0: {}})
    opt._index_update_count = counts.setdefault(0, {})
    return opt


# ------------------------------------------------------------ state trees
def _flatten(state, key, arrays, counter=None):
    counter = [0] if counter is None else counter
    if state is None:
        return None
    if isinstance(state, NDArray):
        name = 'state:%s:%d' % (key, counter[0])
        while name in arrays:  # an int and a str index that print alike
            name = '%s#' % name
        counter[0] += 1
        arrays[name] = state
        return name
    if isinstance(state, (tuple, list)):
        return {'tuple' if isinstance(state, tuple) else 'list':
                [_flatten(s, key, arrays, counter) for s in state]}
    raise ParamError('optimizer states: cannot store a state of type %s for index %r'
                     % (type(state).__name__, key))


def _unflatten(tree, arrays):
    if tree is None:
        return None
    if isinstance(tree, str):
        if tree not in arrays:
            raise FFError('optimizer states: array %r is missing from the file' % tree)
        return arrays[tree]
    if isinstance(tree, dict) and ('tuple' in tree or 'list' in tree):
        items = [_unflatten(t, arrays) for t in tree.get('tuple', tree.get('list'))]
        return tuple(items) if 'tuple' in tree else items
    raise FFError('optimizer states: malformed state structure %r' % (tree,))


def _describe(state):
    if state is None:
        return 'None'
    if isinstance(state, NDArray):
        return '%s %s' % (np.dtype(state.dtype).name, state.shape)
    return '(%s)' % ', '.join(_describe(s) for s in state)


def _same_layout(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, NDArray) or isinstance(b, NDArray):
        return isinstance(a, NDArray) and isinstance(b, NDArray) and a.shape == b.shape \
            and a.dtype is b.dtype
    return isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and \
        len(a) == len(b) and all(_same_layout(x, y) for x, y in zip(a, b))


def _check_fits(idx, grad, weight, first_shape):
    """Refuse a gradient or a created state that does not fit ``weight`` (before any kernel).

    ``first_shape``: the shape of the weight the index's state was made or checked for.
    """
    if grad.shape != weight.shape:
        raise ShapeError('Updater: the gradient of parameter %r has shape %s but the weight has '
                         'shape %s' % (idx, grad.shape, weight.shape))
    if first_shape is not None and tuple(first_shape) != tuple(weight.shape):
        raise ShapeError('Updater: parameter %r was first updated with a weight of shape %s '
                         'and now with shape %s; its optimizer state does not fit. Use a '
                         'new index (or a new Updater) for a weight of another shape'
                         % (idx, tuple(first_shape), tuple(weight.shape)))


def _to_context(state, ctx):
    if isinstance(state, NDArray):
        return state.as_in_context(ctx)
    if isinstance(state, (tuple, list)):
        moved = [_to_context(s, ctx) for s in state]
        return tuple(moved) if isinstance(state, tuple) else moved
    return state


# ------------------------------------------------------------ the updater
def defers(optimizer):
    """Whether ``optimizer``'s CPU kernels may run deferred, together, when the
    :class:`Updater` gets a list of parameters (:mod:`ffnumba.optimizer._deferred`).

    True when the class that defines ``update`` declares ``_one_kernel_update``
    and ``update_multi_precision`` is the base one (which flushes before its copy).
    """
    cls = type(optimizer)
    if cls.update_multi_precision is not Optimizer.update_multi_precision:
        return False
    owner = next((c for c in cls.__mro__ if 'update' in c.__dict__), None)
    return owner is not None and owner.__dict__.get('_one_kernel_update', False) is True


class Updater:
    """Applies an optimizer to (index, grad, weight) triples (MXNet ``Updater``).

    Parameters
    ----------
    optimizer : Optimizer

    Attributes
    ----------
    states : dict
        index -> state (None, NDArray or tuple), created on first use.
    """

    def __init__(self, optimizer):
        if not isinstance(optimizer, Optimizer):
            raise ParamError('Updater: `optimizer` must be an Optimizer. Received: %r'
                             % (optimizer,))
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self._weight_shapes = {}    # index -> shape of the weight its state was made for
        self.rng_state = None       # generator states written with the states (module._resume)

    def __call__(self, index, grad, weight):
        """Update ``weight`` in place (``index``/``grad``/``weight`` may be lists).

        A state loaded by :meth:`set_states` is checked against the weight
        (shapes, dtypes, structure) and moved to the weight's context on first use.
        Lists (one device's parameters, as ``Module.update`` passes them) are
        updated in order; an optimizer that :func:`defers` runs their CPU kernels
        together at the end, split over the kernel threads
        (:mod:`ffnumba.optimizer._deferred`; the same values).

        Raises
        ------
        ParamError
            If a loaded state does not fit the weight.
        ShapeError
            If ``grad`` and ``weight`` differ in shape, or ``weight`` does not
            have the shape of the weight the index's state was created for.
        """
        if isinstance(index, (list, tuple)):
            indices, grads, weights = list(index), list(grad), list(weight)
        else:
            indices, grads, weights = [index], [grad], [weight]
        weights = [as_nd(w) for w in weights]
        grads = [as_nd(g) for g in grads]
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = idx.decode()
            shapes = self.__dict__.setdefault('_weight_shapes', {})
            _check_fits(idx, grads[i], weights[i],
                        shapes.get(idx) if idx in self.states else None)
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced.get(idx, True):
                self.states[idx] = self._sync(idx, self.states[idx], weights[i])
                self.states_synced[idx] = True
            shapes[idx] = weights[i].shape
        if len(indices) > 1 and defers(self.optimizer):
            with _deferred.deferred():      # the kernels run together, split over threads
                for idx, w, g in zip(indices, weights, grads):
                    self.optimizer.update_multi_precision(idx, w, g, self.states[idx])
            return
        for idx, w, g in zip(indices, weights, grads):
            self.optimizer.update_multi_precision(idx, w, g, self.states[idx])

    def _sync(self, idx, state, weight):
        fresh = self.optimizer.create_state_multi_precision(idx, weight)
        if not _same_layout(state, fresh):
            raise ParamError(
                'optimizer states: the loaded state of parameter %r is %s, but %s expects %s '
                'for a weight %s %s' % (idx, _describe(state), type(self.optimizer).__name__,
                                        _describe(fresh), np.dtype(weight.dtype).name,
                                        weight.shape))
        return _to_context(state, weight.context)

    def sync_state_context(self, state, context):
        """``state`` with every array moved to ``context``."""
        return _to_context(state, context)

    # -------------------------------------------------------------- files
    def get_states(self, dump_optimizer=False):
        """The states as bytes in the safe format (see the module docstring).

        Parameters
        ----------
        dump_optimizer : bool, default False
            Also store the optimizer's hyper-parameters, so that
            :meth:`set_states` rebuilds it.

        Returns
        -------
        bytes
        """
        opt = self.optimizer
        arrays, entries = {}, []
        for key, state in self.states.items():
            if not isinstance(key, (int, np.integer, str)):
                raise ParamError('optimizer states: index %r must be an int or a str' % (key,))
            entries.append([_enc(key), _flatten(state, key, arrays)])
        doc = {
            'format': _FORMAT, 'version': _VERSION, 'optimizer': type(opt).__name__,
            'states': entries, 'num_update': int(opt.num_update),
            'counts': _enc(opt._all_index_update_counts), 'extra': _enc(opt._extra_state()),
        }
        if dump_optimizer:
            doc['optimizer_config'] = _optimizer_config(opt)
        if getattr(self, 'rng_state', None):
            doc['rng'] = self.rng_state     # generator states (module._resume)
        doc['checksum'] = {'sha256': _checksum(doc, arrays)}
        head = np.frombuffer(json.dumps(doc, sort_keys=True).encode('utf-8'), np.uint8)
        out = {HEADER: head}
        out.update(arrays)
        return params_io.dumps(out)

    def set_states(self, states):
        """Load states written by :meth:`get_states`.

        Parameters
        ----------
        states : bytes

        Raises
        ------
        FFError
            For a pickle (refused: unpickling can run code) or a corrupted file.
        ParamError
            If the file was written for another optimizer.
        """
        if isinstance(states, dict):  # from import_mxnet_states
            self.states = dict(states)
            self.states_synced = dict.fromkeys(self.states, False)
            self._weight_shapes = {}
            return
        if not isinstance(states, (bytes, bytearray, memoryview)):
            raise ParamError('Updater.set_states: expected bytes. Received: %s'
                             % type(states).__name__)
        states = bytes(states)
        if params_io.looks_like_pickle(states):
            raise FFError(_PICKLE_MSG % 'the data')
        if len(states) >= 16 and states[8:16] != bytes(8):
            # the container's reserved word is always 0; a flip there is corruption too
            raise FFError('optimizer states: corrupted container header (reserved word is not 0)')
        data = params_io.loads(states, source='optimizer states')
        if not isinstance(data, dict) or HEADER not in data:
            raise FFError('optimizer states: not an ffnumba optimizer state file (no %s entry)'
                          % HEADER)
        try:
            doc = json.loads(data.pop(HEADER).asnumpy().tobytes().decode('utf-8'))
            unknown = set(doc) - _HEADER_KEYS
            if unknown:     # a flipped byte in a key (a lost ``checksum`` key included)
                raise ValueError('unknown entries %s' % sorted(unknown))
            if doc.get('format') != _FORMAT or doc.get('version') != _VERSION:
                raise ValueError('format %r version %r' % (doc.get('format'),
                                                           doc.get('version')))
            if 'checksum' in doc and doc['checksum'].get('sha256') != _checksum(doc, data):
                raise FFError('optimizer states: checksum mismatch: the file was changed or '
                              'corrupted after it was written')
            name = doc['optimizer']
            loaded = {_dec(k): _unflatten(t, data) for k, t in doc['states']}
            counts = _dec(doc['counts'])
            extra = _dec(doc['extra'])
            num_update = int(doc['num_update'])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise FFError('optimizer states: corrupted header: %s' % e) from None
        if 'optimizer_config' in doc:
            self.optimizer = _rebuild_optimizer(name, doc['optimizer_config'])
        elif name != type(self.optimizer).__name__:
            raise ParamError('optimizer states: the file holds states of optimizer %r, but '
                             'this updater uses %r' % (name, type(self.optimizer).__name__))
        opt = self.optimizer
        opt._all_index_update_counts = counts
        opt._index_update_count = counts.setdefault(0, {})
        opt.num_update = num_update
        opt._load_extra_state(extra)
        self.states = loaded
        self.states_synced = dict.fromkeys(self.states, False)
        self._weight_shapes = {}
        self.rng_state = doc.get('rng')     # restored by the next fit (module._resume)


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer`` (MXNet ``get_updater``)."""
    return Updater(optimizer)


# ------------------------------------------------------------ MXNet pickles
class _MXNDArray:
    """Stand-in for ``mxnet.ndarray.ndarray.NDArray`` while unpickling."""

    def __init__(self, *args, **kwargs):  # MXNet pickles NDArray(None) + state
        self.array = None

    def __setstate__(self, state):
        handle = state.get('handle') if isinstance(state, dict) else None
        if not isinstance(handle, (bytes, bytearray)):
            raise FFError('import_mxnet_states: an NDArray without a handle')
        self.array = params_io.record_from_bytes(bytes(handle), 'pickled NDArray')


class _SafeUnpickler(pickle.Unpickler):
    _ALLOWED = {('mxnet.ndarray.ndarray', 'NDArray'): _MXNDArray,
                ('builtins', 'bytearray'): bytearray}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise FFError('import_mxnet_states: the pickle refers to %s.%s; only NDArray '
                          'states can be imported (a file written with dump_optimizer=True '
                          'holds the optimizer object too)' % (module, name))
        return self._ALLOWED[(module, name)]


def _convert(obj):
    if obj is None:
        return None
    if isinstance(obj, _MXNDArray):
        if obj.array is None:
            raise FFError('import_mxnet_states: an NDArray without data')
        return array(obj.array, dtype=obj.array.dtype)
    if isinstance(obj, (tuple, list)):
        items = [_convert(o) for o in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    raise FFError('import_mxnet_states: unexpected %s in the states' % type(obj).__name__)


def import_mxnet_states(data):
    """Read the states of an MXNet ``.states`` pickle without running code.

    Only the classes ``mxnet.ndarray.ndarray.NDArray`` and ``bytearray`` may
    appear; each NDArray is decoded from its binary record. Counters are not
    in MXNet's files (update counts restart, as in MXNet).

    Parameters
    ----------
    data : bytes
        The file's contents.

    Returns
    -------
    dict
        index -> state, to pass to :meth:`Updater.set_states`.

    Raises
    ------
    FFError
        If the pickle holds anything else or is corrupted.
    """
    try:
        obj = _SafeUnpickler(io.BytesIO(bytes(data))).load()
    except FFError:
        raise
    except Exception as e:  # any unpickling failure of untrusted bytes
        raise FFError('import_mxnet_states: not a readable MXNet states pickle (%s: %s)'
                      % (type(e).__name__, e)) from None
    if not isinstance(obj, dict):
        raise FFError('import_mxnet_states: expected a dict of states, got %s'
                      % type(obj).__name__)
    return {k: _convert(v) for k, v in obj.items()}
