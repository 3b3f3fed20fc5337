"""Keras-style models: :class:`Model` (functional form) and :class:`Sequential`.

A model is a graph of layer calls. :meth:`Model.to_symbol` names the layers
(``<prefix><k>``, one counter per prefix within the model, explicit names
win) and builds the ``ff.sym`` graph; the training methods (``compile``,
``fit``, ``evaluate``, ``predict``) come from :class:`~.training.TrainingMixin`
and run :class:`ffnumba.mod.Module` underneath.
"""
from ..base import ParamError, ShapeError
from .. import symbol as S
from .base import KerasTensor, Layer, check_name, check_shape
from .base import LAYERS
from .saving import WeightsMixin
from .training import TrainingMixin

__all__ = ['Model', 'Sequential']


def _as_tensor_list(value, what):
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(t, KerasTensor) for t in items):
        raise ParamError('Model: `%s` must be a tensor or a list of tensors (from L.Input and '
                         'layer calls). Received: %s=%r' % (what, what, value))
    return items


def _fmt_shape(shape):
    return '(None, %s)' % ', '.join(str(d) for d in shape[1:]) if len(shape) > 1 else '(None,)'


class Model(TrainingMixin, WeightsMixin):
    """A model from input tensors to output tensors (Keras functional API).

    Example::

        x = L.Input(shape=(1, 28, 28))
        y = L.Dense(10)(L.Flatten()(x))
        model = L.Model(x, y)

    Parameters
    ----------
    inputs : KerasTensor or list of KerasTensor
        From :func:`ffnumba.layers.Input`.
    outputs : KerasTensor or list of KerasTensor
    name : str, optional

    Raises
    ------
    ParamError
        For non-tensors, outputs that do not depend only on ``inputs``, a
        layer called twice (weight sharing is not supported), or two layers
        with the same explicit name.
    """

    def __init__(self, inputs, outputs, name=None):
        self.name = check_name('Model', name)
        self._inputs = _as_tensor_list(inputs, 'inputs')
        for t in self._inputs:
            if not t.is_input:
                raise ParamError('Model: `inputs` must come from L.Input. Received: %r' % (t,))
        self._outputs = _as_tensor_list(outputs, 'outputs')
        self._init_training()

    # ------------------------------------------------------------ graph
    def _nodes(self, outputs=None):
        """The layer calls reachable from ``outputs``, inputs first (creation order)."""
        seen, stack = {}, list(self._outputs if outputs is None else outputs)
        while stack:
            t = stack.pop()
            if t.uid in seen:
                continue
            seen[t.uid] = t
            stack.extend(t.inputs)
        inputs = {t.uid for t in self._inputs}
        for t in seen.values():
            if t.is_input and t.uid not in inputs:
                raise ParamError('Model: the outputs depend on an L.Input that is not in '
                                 '`inputs`: %r' % (t,))
        nodes = sorted((t for t in seen.values() if not t.is_input), key=lambda t: t.uid)
        layers = {}
        for t in nodes:
            if t.output_index is not None:      # one output of a multi-output call
                continue
            if id(t.layer) in layers:
                raise ParamError('%s: a layer instance can be called only once in a model '
                                 '(weight sharing is not supported). Create a new layer.'
                                 % type(t.layer).__name__)
            layers[id(t.layer)] = t
        return nodes

    def _input_names(self):
        names = []
        for i, t in enumerate(self._inputs):
            if t.name is not None:
                names.append(t.name)
            else:
                names.append('data' if len(self._inputs) == 1 else 'data%d' % i)
        if len(set(names)) != len(names):
            raise ParamError('Model: input names must be unique. Received: %r' % (names,))
        return names

    def _layer_names(self, nodes):
        """Node name of each layer call: explicit names, then per-prefix counters."""
        taken = set(self._input_names())
        views = [t for t in nodes if t.output_index is not None]
        nodes = [t for t in nodes if t.output_index is None]
        for t in nodes:
            if t.layer.name is not None:
                if t.layer.name in taken:
                    raise ParamError('%s: `name` must be unique within the model. Received: '
                                     'name=%r' % (type(t.layer).__name__, t.layer.name))
                taken.add(t.layer.name)
        counters, names = {}, {}
        for t in nodes:
            name = t.layer.name
            if name is None:
                k = counters.get(t.layer.prefix, 0)
                while '%s%d' % (t.layer.prefix, k) in taken:
                    k += 1
                name = '%s%d' % (t.layer.prefix, k)
                counters[t.layer.prefix] = k + 1
                taken.add(name)
            names[t.uid] = name
        for t in views:
            names[t.uid] = '%s_output%d' % (names[t.inputs[0].uid], t.output_index)
        return names

    def _build(self):
        """``(outputs, logits, records, out_names)``: output Symbols, their
        pre-activation logits (or None), ``[(layer, name, out_symbol)]`` in order
        and the node name of each output."""
        outputs = self._outputs
        nodes = self._nodes(outputs)
        names = self._layer_names(nodes)
        syms, logits = {}, {}
        for t, name in zip(self._inputs, self._input_names()):
            syms[t.uid] = S.Variable(name)
        try:
            hint = self._input_shapes()
        except ShapeError:
            hint = None
        records = []
        for t in nodes:
            if t.output_index is not None:
                syms[t.uid] = syms[t.inputs[0].uid][t.output_index]
                continue
            t.layer._input_hint = hint
            out, pre = t.layer.build_symbol(names[t.uid], [syms[i.uid] for i in t.inputs])
            syms[t.uid], logits[t.uid] = out, pre
            # a multi-output call (return_state) is recorded by its first output
            records.append((t.layer, names[t.uid], out[0] if len(out.list_outputs()) > 1
                            else out))
            t.layer._node_name = names[t.uid]
            t.layer._owner = self
        return ([syms[t.uid] for t in outputs], [logits.get(t.uid) for t in outputs], records,
                [names.get(t.uid, 'output%d' % i) for i, t in enumerate(outputs)])

    def to_symbol(self, with_loss=True):
        """The model as a Symbol.

        Parameters
        ----------
        with_loss : bool, default True
            Add the loss head chosen in :meth:`compile` (e.g. ``SoftmaxOutput``
            named ``softmax``, label ``softmax_label``). A final softmax/sigmoid
            activation is dropped under a head that applies it itself. False
            returns the bare network (a Group for several outputs).

        Raises
        ------
        FFError
            ``with_loss=True`` before :meth:`compile`.
        """
        outputs, logits, _, _ = self._build()
        if not with_loss:
            return outputs[0] if len(outputs) == 1 else S.Group(outputs)
        return self._loss_head(outputs, logits)

    @property
    def layers(self):
        """The layers, in graph order."""
        records = self._named_layers()
        for layer, _ in records:
            layer._owner = self
        return [layer for layer, _ in records]

    @property
    def output_names(self):
        """Node names of the outputs (the output layers' names)."""
        return [name for _, name in self._named_layers(outputs_only=True)]

    def _named_layers(self, outputs_only=False):
        """``[(layer, node name)]`` of every layer call in order (or of the outputs),
        without building the graph."""
        outputs = self._outputs     # a Sequential makes new tensors on each access
        nodes = self._nodes(outputs)
        names = self._layer_names(nodes)
        names.update(zip((t.uid for t in self._inputs), self._input_names()))
        if not outputs_only:
            nodes = [t for t in nodes if t.output_index is None]
        return [(t.layer, names[t.uid]) for t in (outputs if outputs_only else nodes)]

    def get_layer(self, name=None, index=None):
        """The layer called ``name`` (its node name, e.g. ``'dense1'``) or at ``index``.

        Raises
        ------
        ParamError
            For an unknown name or an index out of range.
        """
        records = self._named_layers()
        for layer, _ in records:
            layer._owner = self
        if index is not None:
            if not -len(records) <= index < len(records):
                raise ParamError('get_layer: index %d is out of range (%d layers)'
                                 % (index, len(records)))
            return records[index][0]
        for layer, node in records:
            if node == name:
                return layer
        raise ParamError('get_layer: no layer named %r; layers: %s'
                         % (name, ', '.join(r[1] for r in records)))

    # ------------------------------------------------------------ config
    def get_config(self):
        """The architecture as JSON-able data: ``{'class_name', 'config'}`` (Keras style).

        :func:`ffnumba.layers.model_from_config` (and :meth:`from_config`)
        rebuild an untrained model with the same layers, names and weights' names.
        """
        nodes = self._nodes()
        ids = {t.uid: i for i, t in enumerate(self._inputs)}
        inputs = [{'shape': None if t.shape is None else list(t.shape), 'name': t.name,
                   'dtype': t.dtype} for t in self._inputs]
        layers = []
        for t in nodes:
            ids[t.uid] = len(ids)
            if t.output_index is not None:
                layers.append({'output_index': t.output_index, 'inbound': [ids[t.inputs[0].uid]]})
                continue
            layers.append({'class_name': type(t.layer).__name__,
                           'config': _jsonable(t.layer.get_config()),
                           'inbound': [ids[i.uid] for i in t.inputs]})
        return {'class_name': 'Model', 'config': {
            'name': self.name, 'inputs': inputs, 'layers': layers,
            'outputs': [ids[t.uid] for t in self._outputs]}}

    @classmethod
    def from_config(cls, config):
        """A new model from the ``'config'`` part of :meth:`get_config`."""
        from .base import Input
        tensors = [Input(tuple(i['shape']), name=i['name'], dtype=i.get('dtype', 'float32'))
                   if i['shape'] is not None else KerasTensor(name=i['name'])
                   for i in config['inputs']]
        inputs = list(tensors)
        for entry in config['layers']:
            args = [tensors[k] for k in entry['inbound']]
            if entry.get('output_index') is not None:
                tensors.append(KerasTensor(layer=args[0].layer, inputs=args,
                                           output_index=entry['output_index']))
                continue
            layer = _layer_from_config(entry)
            if hasattr(layer, '_call_node'):     # recurrent: data, then the initial states
                tensors.append(layer._call_node(args[0], args[1:]))
            else:
                tensors.append(layer(args if layer.num_inputs != 1 else args[0]))
        outputs = [tensors[k] for k in config['outputs']]
        return Model(inputs if len(inputs) > 1 else inputs[0],
                     outputs if len(outputs) > 1 else outputs[0], name=config['name'])

    @property
    def input_names(self):
        """The data names the Module sees (``['data']`` for one unnamed input)."""
        return self._input_names()

    def _input_shapes(self, input_shape=None):
        """``{data_name: sample_shape}`` from L.Input, ``input_shape`` or the last fit."""
        names = self._input_names()
        shapes = {}
        for t, name in zip(self._inputs, names):
            if t.shape is not None:
                shapes[name] = t.shape
        if input_shape is not None:
            if isinstance(input_shape, dict):
                shapes.update({k: check_shape('summary', 'input_shape', v)
                               for k, v in input_shape.items()})
            else:
                shapes[names[0]] = check_shape('summary', 'input_shape', input_shape)
        for name in names:
            if name not in shapes and name in self._seen_shapes:
                shapes[name] = self._seen_shapes[name]
        missing = [n for n in names if n not in shapes]
        if missing:
            raise ShapeError('%s: the shape of input %s is unknown. Start the model with '
                             'L.Input(shape=...), give input_shape=..., or call fit first.'
                             % (self._display_name(), ', '.join(missing)))
        return shapes

    def _display_name(self):
        return self.name or type(self).__name__.lower()

    # ------------------------------------------------------------ summary
    def summary(self, input_shape=None, print_fn=print):
        """Print and return a table of layers, output shapes and parameter counts.

        Shapes come from ``infer_shape`` (batch shown as None). A layer's count
        covers its learnable weights and its auxiliary states (BatchNorm's
        moving mean and variance, counted as non-trainable, as in Keras).

        Parameters
        ----------
        input_shape : tuple or dict, optional
            Sample shape(s) when the model has no L.Input and was not fitted.
        print_fn : callable or None, default print
            None prints nothing.

        Returns
        -------
        str
        """
        shapes = self._input_shapes(input_shape)
        outputs, _, records, _ = self._build()
        internals = S.Group([rec[2] for rec in records])
        batch = {k: (1,) + tuple(v) for k, v in shapes.items()}
        try:
            arg_shapes, out_shapes, aux_shapes = internals.infer_shape(**batch)
        except ShapeError as err:
            raise ShapeError('%s: %s' % (self._display_name(), err)) from None
        sizes = dict(zip(internals.list_arguments(), arg_shapes))
        sizes.update(zip(internals.list_auxiliary_states(), aux_shapes))
        rows, total, trainable = [], 0, 0
        for name, shape in shapes.items():
            rows.append(('%s (Input)' % name, _fmt_shape((1,) + tuple(shape)), 0))
        for (layer, name, _), oshape in zip(records, out_shapes):
            args, aux = layer.param_names(name)
            n_arg = sum(_size(sizes[a]) for a in args)
            n_aux = sum(_size(sizes[a]) for a in aux)
            rows.append(('%s (%s)' % (name, type(layer).__name__), _fmt_shape(oshape),
                         n_arg + n_aux))
            total += n_arg + n_aux
            trainable += n_arg if layer.trainable else 0
        widths = [max(len('Layer (type)'), *(len(r[0]) for r in rows)) + 2,
                  max(len('Output Shape'), *(len(r[1]) for r in rows)) + 2, 12]
        line = '=' * sum(widths)
        head = 'Model: "%s"' % self._display_name()
        lines = [head, line, 'Layer (type)'.ljust(widths[0]) + 'Output Shape'.ljust(widths[1])
                 + 'Param #', line]
        for r in rows:
            lines.append(r[0].ljust(widths[0]) + r[1].ljust(widths[1]) + str(r[2]))
        lines += [line, 'Total params: %d' % total, 'Trainable params: %d' % trainable,
                  'Non-trainable params: %d' % (total - trainable), '_' * sum(widths)]
        text = '\n'.join(lines)
        if print_fn is not None:
            print_fn(text)
        self._summary_counts = {r[0]: r[2] for r in rows}
        return text

    def count_params(self, input_shape=None):
        """Total number of weights and auxiliary states (what :meth:`summary` reports)."""
        self.summary(input_shape, print_fn=None)
        return sum(self._summary_counts.values())


def _jsonable(cfg):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}


def _layer_from_config(entry):
    cls = LAYERS.get(entry.get('class_name'))
    if cls is None:
        raise ParamError('from_config: unknown layer class %r' % (entry.get('class_name'),))
    return cls.from_config(entry['config'])


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class Sequential(Model):
    """A linear stack of layers.

    Parameters
    ----------
    layers : list of Layer, optional
        May start with an ``L.Input(shape=...)``; a first layer's
        ``input_shape=`` works too. Otherwise shapes come from the data at fit.
    name : str, optional

    Example::

        net = L.Sequential([L.Flatten(), L.Dense(64, activation='relu'), L.Dense(10)])
    """

    def __init__(self, layers=None, name=None):
        self.name = check_name('Sequential', name)
        self._input = None
        self._layers = []
        self._init_training()
        for layer in layers or ():
            self.add(layer)

    def add(self, layer):
        """Append a layer (or, first, an ``L.Input``)."""
        if isinstance(layer, KerasTensor):
            if not layer.is_input or self._layers or self._input is not None:
                raise ParamError('Sequential: an L.Input can only come first. Received: %r'
                                 % (layer,))
            self._input = layer
            return
        if not isinstance(layer, Layer):
            raise ParamError('Sequential: `layers` must hold Layer instances. Received: %r'
                             % (layer,))
        if layer.num_inputs != 1:
            raise ParamError('Sequential: %s takes several inputs; use the functional form '
                             '(L.Model).' % type(layer).__name__)
        if getattr(layer, 'num_outputs', 1) != 1:
            raise ParamError('Sequential: %s returns several tensors (return_state=True); use '
                             'the functional form (L.Model).' % type(layer).__name__)
        if any(existing is layer for existing in self._layers):
            raise ParamError('%s: a layer instance can be added only once (weight sharing '
                             'is not supported).' % type(layer).__name__)
        self._layers.append(layer)
        self._module = None

    def pop(self):
        """Remove and return the last layer."""
        if not self._layers:
            raise ParamError('Sequential: there is no layer to pop.')
        self._module = None
        return self._layers.pop()

    def get_config(self):
        """``{'class_name': 'Sequential', 'config': {'name', 'input', 'layers'}}``."""
        first = self._input
        inp = None
        if first is not None and first.shape is not None:
            inp = {'shape': list(first.shape), 'name': first.name, 'dtype': first.dtype}
        return {'class_name': 'Sequential', 'config': {
            'name': self.name, 'input': inp,
            'layers': [{'class_name': type(layer).__name__,
                        'config': _jsonable(layer.get_config())} for layer in self._layers]}}

    @classmethod
    def from_config(cls, config):
        """A new Sequential from the ``'config'`` part of :meth:`get_config`."""
        from .base import Input
        layers = []
        if config.get('input') is not None:
            i = config['input']
            layers.append(Input(tuple(i['shape']), name=i['name'], dtype=i.get('dtype',
                                                                              'float32')))
        layers += [_layer_from_config(entry) for entry in config['layers']]
        return Sequential(layers, name=config['name'])

    @property
    def _inputs(self):
        if self._input is None:
            shape = self._layers[0].input_shape if self._layers else None
            self._input = KerasTensor(shape=shape)
        return [self._input]

    @property
    def _outputs(self):
        if not self._layers:
            raise ParamError('Sequential: the model has no layers.')
        t = self._inputs[0]
        for layer in self._layers:
            t = layer(t)
        return [t]
