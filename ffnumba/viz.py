"""Network visualization: a printed layer table and a Graphviz drawing.

``ff.viz`` is MXNet 1.x's ``mx.viz``: :func:`print_summary` prints a
Keras-style table of the layers of a symbol (output shape, parameter count,
the layers it reads from) and :func:`plot_network` builds a
``graphviz.Digraph`` of the graph. Both read the graph from the symbol's
JSON (``json.loads(symbol.tojson())``) and the shapes from
``symbol.get_internals().infer_shape``, so they show exactly what MXNet
shows for the same network, including MXNet's counting rules (for example
a ``FullyConnected`` counts ``(channels + 1) * num_hidden`` parameters from
the second axis of its input only, and a ``BatchNorm`` counts ``2 * C``).

The Python package ``graphviz`` is optional: only :func:`plot_network`
needs it, and it raises :class:`GraphvizMissingError` when it is absent.

For ``ff.layers`` models (Keras style), :func:`plot_history` draws a
History's loss and metrics per epoch and :func:`plot_model` the layer graph
with names, classes and output shapes (graphviz when present, matplotlib
otherwise); both need matplotlib (``pip install ffnumba[viz]``).
"""
import copy
import json
import re
import warnings

from .base import FFError, ShapeError
from .symbol import Symbol

__all__ = ['print_summary', 'plot_network', 'GraphvizMissingError', 'plot_history', 'plot_model']

# Fill colours of the drawing, by operator family (MXNet's palette).
_COLORS = ('#8dd3c7', '#fb8072', '#ffffb3', '#bebada', '#80b1d3',
           '#fdb462', '#b3de69', '#fccde5')

# Suffixes of inputs that plot_network treats as parameters.
_WEIGHT_SUFFIXES = ('_weight', '_bias', '_beta', '_gamma', '_moving_var',
                    '_moving_mean', '_running_var', '_running_mean')


class GraphvizMissingError(FFError, ImportError):
    """The optional ``graphviz`` Python package is not installed."""


class _NotASymbolError(FFError, TypeError):
    """A visualization function received something that is not a Symbol."""


def _str2tuple(text):
    """Return the digit groups of a shape attribute string, as strings.

    ``'(3, 3)'`` -> ``['3', '3']``; MXNet stores tuples as such strings.
    """
    return re.findall(r'\d+', text)


def _check_symbol(symbol, func):
    if not isinstance(symbol, Symbol):
        raise _NotASymbolError(
            '{}: `symbol` must be a Symbol. Received: symbol={!r}'.format(
                func, type(symbol).__name__))


def _internal_dict(internals, values, what, func):
    """Map each internal output name to its inferred shape or type."""
    if values is None:
        raise ShapeError(
            '{}: input {} is incomplete; give the {} of every data input '
            '(cannot infer them for all of {})'.format(
                func, what, what, internals.list_outputs()))
    return dict(zip(internals.list_outputs(), values))


def _print_row(fields, positions):
    """Print ``fields`` left-aligned, each cut and padded to end at its position."""
    line = ''
    for field, stop in zip(fields, positions):
        line += str(field)
        line = line[:stop]
        line += ' ' * (stop - len(line))
    print(line)


def _layer_params(node, shape_dict, pre_filter):
    """Parameter count of one layer, by MXNet's summary rules."""
    op = node['op']
    attrs = node.get('attrs', {})
    no_bias = attrs.get('no_bias') == 'True'
    if op == 'Convolution':
        num_filter = int(attrs['num_filter'])
        count = pre_filter * num_filter // int(attrs.get('num_group', '1'))
        for k in _str2tuple(attrs['kernel']):
            count *= int(k)
        return count if no_bias else count + num_filter
    if op == 'FullyConnected':
        num_hidden = int(attrs['num_hidden'])
        return (pre_filter if no_bias else pre_filter + 1) * num_hidden
    if op == 'BatchNorm':
        if shape_dict is None:
            return 0
        return int(shape_dict[node['name'] + '_output'][1]) * 2
    if op == 'Embedding':
        return int(attrs['input_dim']) * int(attrs['output_dim'])
    return 0


def print_summary(symbol, shape=None, line_length=120, positions=[.44, .64, .74, 1.]):  # noqa: B006
    """Print a table of the layers of a network and its parameter count.

    One row per operator node (and per graph input that MXNet treats as a
    head: the first node of the graph, normally ``data``): the layer name and
    operator, the output shape without the batch axis, the number of
    parameters, and the layers it reads from (one per row). Parameter counts
    follow MXNet's rules: ``Convolution``
    ``C_in * num_filter / num_group * prod(kernel) (+ num_filter)``,
    ``FullyConnected`` ``(C_in + 1) * num_hidden`` (``C_in`` = axis 1 of the
    input, ``+ 1`` dropped when ``no_bias``), ``BatchNorm`` ``2 * C``,
    ``Embedding`` ``input_dim * output_dim``; other operators count 0.
    Without ``shape`` the shapes are blank and the input channel counts are
    taken as 0. The output is the same text as MXNet 1.9.1's
    ``mx.viz.print_summary``.

    Parameters
    ----------
    symbol : Symbol
        The network to describe.
    shape : dict of str to tuple of int, optional, default None
        Shapes of the data inputs (``{'data': (batch, ...)}``). When given,
        output shapes are shown and used for the parameter counts.
    line_length : int, optional, default 120
        Width of the table in characters.
    positions : list of float or int, optional, default [.44, .64, .74, 1.]
        Right edges of the four columns: fractions of ``line_length`` when
        the last one is ``<= 1``, else absolute character positions.

    Returns
    -------
    None
        The table is printed to standard output.

    Raises
    ------
    FFError
        ``symbol`` is not a Symbol (also a ``TypeError``); the shapes are
        incomplete (``ShapeError``, also a ``ValueError``) or inconsistent.

    Notes
    -----
    Source: MXNet 1.9.1, ``python/mxnet/visualization.py`` (behaviour).
    """
    _check_symbol(symbol, 'print_summary')
    shape_dict = None
    if shape is not None:
        internals = symbol.get_internals()
        _, out_shapes, _ = internals.infer_shape(**shape)
        shape_dict = _internal_dict(internals, out_shapes, 'shape', 'print_summary')
    conf = json.loads(symbol.tojson())
    nodes = conf['nodes']
    # MXNet takes the set of the first head entry [node, index, version]:
    # node 0 (always present as an index) therefore counts as a head.
    heads = set(conf['heads'][0])
    if positions[-1] <= 1:
        positions = [int(line_length * p) for p in positions]
    else:
        positions = list(positions)

    def entry_shape(node):
        """Shape (without the batch axis) of a node's output, or None."""
        if shape_dict is None:
            return None
        key = node['name'] + '_output' if node['op'] != 'null' else node['name']
        found = shape_dict.get(key)
        return None if found is None else found[1:]

    print('_' * line_length)
    _print_row(['Layer (type)', 'Output Shape', 'Param #', 'Previous Layer'], positions)
    print('=' * line_length)
    total_params = 0
    for i, node in enumerate(nodes):
        op = node['op']
        if op == 'null' and i > 0:
            continue
        out_shape = ()
        if op != 'null' or i in heads:
            out_shape = entry_shape(node) or ()
        previous = []
        pre_filter = 0
        if op != 'null':
            for item in node['inputs']:
                source = nodes[item[0]]
                if source['op'] != 'null' or item[0] in heads:
                    previous.append(source['name'])
                    in_shape = entry_shape(source)
                    if in_shape is not None:
                        pre_filter += int(in_shape[0])
        count = _layer_params(node, shape_dict, pre_filter)
        total_params += count
        _print_row([node['name'] + '(' + op + ')',
                    'x'.join(str(x) for x in out_shape),
                    count,
                    previous[0] if previous else ''], positions)
        for name in previous[1:]:
            _print_row(['', '', '', name], positions)
        print(('=' if i == len(nodes) - 1 else '_') * line_length)
    print('Total params: {params}'.format(params=total_params))
    print('_' * line_length)


def _import_digraph():
    try:
        from graphviz import Digraph
    except ImportError as err:
        raise GraphvizMissingError(
            'plot_network: drawing a network requires the optional Python '
            'package `graphviz` (and the Graphviz binaries to render it): '
            'pip install graphviz') from err
    return Digraph


def _node_style(node, base_attr):
    """Label and graphviz attributes of one drawn node (MXNet's styling)."""
    op = node['op']
    attrs = node.get('attrs') or {}
    attr = copy.deepcopy(base_attr)
    label = node['name']
    color = _COLORS[7]
    if op == 'null':
        attr['shape'] = 'oval'
        color = _COLORS[0]
    elif op == 'Convolution':
        stride = 'x'.join(_str2tuple(attrs['stride'])) if 'stride' in attrs else '1'
        label = 'Convolution\n{}/{}, {}'.format(
            'x'.join(_str2tuple(attrs['kernel'])), stride, attrs['num_filter'])
        color = _COLORS[1]
    elif op == 'FullyConnected':
        label = 'FullyConnected\n{}'.format(attrs['num_hidden'])
        color = _COLORS[1]
    elif op == 'BatchNorm':
        color = _COLORS[3]
    elif op == 'Activation':
        label = 'Activation\n{}'.format(attrs['act_type'])
        color = _COLORS[2]
    elif op == 'LeakyReLU':
        label = 'LeakyReLU\n{}'.format(attrs.get('act_type', 'Leaky'))
        color = _COLORS[2]
    elif op == 'Pooling':
        kernel = 'x'.join(_str2tuple(attrs['kernel'])) if 'kernel' in attrs else '[]'
        stride = 'x'.join(_str2tuple(attrs['stride'])) if 'stride' in attrs else '1'
        label = 'Pooling\n{}, {}/{}'.format(attrs['pool_type'], kernel, stride)
        color = _COLORS[4]
    elif op in ('Concat', 'Flatten', 'Reshape'):
        color = _COLORS[5]
    elif op == 'Softmax':
        color = _COLORS[6]
    elif op == 'Custom':
        label = attrs['op_type']
    attr['fillcolor'] = color
    return label, attr


def _edge_key(source, index, table):
    """Name of the internal output an edge from ``source`` carries.

    MXNet labels an edge leaving a node with a ``num_outputs`` attribute with
    that node's last output; we do the same, and fall back to the output the
    edge really reads when that name does not exist.
    """
    if source['op'] == 'null':
        return source['name']
    key = source['name'] + '_output'
    attrs = source.get('attrs') or {}
    if 'num_outputs' in attrs:
        key += str(int(attrs['num_outputs']) - 1)
    if key not in table:
        for cand in (source['name'] + '_output' + str(index), source['name'] + '_output'):
            if cand in table:
                return cand
    return key


def plot_network(symbol, title='plot', save_format='pdf', shape=None, dtype=None,
                 node_attrs={}, hide_weights=True):  # noqa: B006
    """Build a Graphviz drawing of a network.

    Every operator node and every graph input becomes a drawn node (inputs
    as ovals); an edge goes from each node back to each of its inputs
    (``dir='back'``, so arrows point along the data flow). Parameter inputs
    (names ending in ``_weight``, ``_bias``, ``_beta``, ``_gamma``,
    ``_moving_mean``, ``_moving_var``, ``_running_mean``, ``_running_var``)
    are never drawn as nodes; with ``hide_weights`` their edges are dropped
    too. Layers are labelled as MXNet labels them (``'FullyConnected\\n128'``,
    ``'Convolution\\n3x3/1, 8'``, ``'Pooling\\nmax, 2x2/2'``,
    ``'Activation\\nrelu'``), and edges carry the shape without the batch
    axis (``'8x16x16'``) and/or ``'(float32)'`` when ``shape``/``dtype`` are
    given. The structure equals MXNet 1.9.1's ``mx.viz.plot_network``.

    Parameters
    ----------
    symbol : Symbol
        The network to draw.
    title : str, optional, default 'plot'
        Name of the digraph (and of the rendered file).
    save_format : str, optional, default 'pdf'
        Graphviz output format used by ``render``/``view``.
    shape : dict of str to tuple of int, optional, default None
        Input shapes; when given, edges are labelled with shapes.
    dtype : dict of str to numpy dtype, optional, default None
        Input types; when given, edge labels end with ``(typename)``.
    node_attrs : dict of str to str, optional, default {}
        Graphviz node attributes that override the defaults
        (``shape='box', fixedsize='true', width='1.3', height='0.8034',
        style='filled'``).
    hide_weights : bool, optional, default True
        Drop the edges to parameter inputs.

    Returns
    -------
    graphviz.Digraph
        The drawing; call ``render()`` or ``view()`` to produce a file.

    Raises
    ------
    GraphvizMissingError
        The optional ``graphviz`` package is missing (an ``FFError`` and an
        ``ImportError``): ``pip install graphviz``.
    FFError
        ``symbol`` is not a Symbol, or ``shape``/``dtype`` are incomplete.

    Notes
    -----
    Source: MXNet 1.9.1, ``python/mxnet/visualization.py`` (behaviour).
    A name used by several nodes gives a ``RuntimeWarning``, as in MXNet.
    """
    digraph_cls = _import_digraph()
    _check_symbol(symbol, 'plot_network')
    internals = symbol.get_internals()
    shape_dict = type_dict = None
    if shape is not None:
        _, out_shapes, _ = internals.infer_shape(**shape)
        shape_dict = _internal_dict(internals, out_shapes, 'shape', 'plot_network')
    if dtype is not None:
        _, out_types, _ = internals.infer_type(**dtype)
        type_dict = _internal_dict(internals, out_types, 'type', 'plot_network')
    nodes = json.loads(symbol.tojson())['nodes']
    names = [node['name'] for node in nodes]
    if len(names) != len(set(names)):
        repeated = sorted({n for n in names if names.count(n) > 1})
        warnings.warn('There are multiple variables with the same name in your graph, '
                      'this may result in cyclic graph. Repeated names: '
                      + ','.join(repeated), RuntimeWarning)
    base_attr = {'shape': 'box', 'fixedsize': 'true', 'width': '1.3',
                 'height': '0.8034', 'style': 'filled'}
    base_attr.update(node_attrs)
    dot = digraph_cls(name=title, format=save_format)

    hidden = set()
    for node in nodes:
        if node['op'] == 'null' and node['name'].endswith(_WEIGHT_SUFFIXES):
            if hide_weights:
                hidden.add(node['name'])
            continue
        label, attr = _node_style(node, base_attr)
        dot.node(name=node['name'], label=label, **attr)

    for node in nodes:
        if node['op'] == 'null':
            continue
        inputs = node['inputs']
        if node['op'] == '_contrib_BilinearResize2D':
            inputs = inputs[:1]
        for item in inputs:
            source = nodes[item[0]]
            if source['name'] in hidden:
                continue
            attr = {'dir': 'back', 'arrowtail': 'open', 'label': ''}
            if shape_dict is not None:
                key = _edge_key(source, item[1], shape_dict)
                attr['label'] = 'x'.join(str(x) for x in shape_dict[key][1:])
            if type_dict is not None:
                key = _edge_key(source, item[1], type_dict)
                attr['label'] += '(' + type_dict[key].__name__ + ')'
            dot.edge(tail_name=node['name'], head_name=source['name'], **attr)
    return dot


def plot_history(history, keys=None, to_file=None, title=None):
    """Draw a Keras-style History (see :func:`ffnumba.layers.plotting.plot_history`)."""
    from .layers.plotting import plot_history as _plot
    return _plot(history, keys=keys, to_file=to_file, title=title)


def plot_model(model, to_file='model.png', show_shapes=True, rankdir='TB', dpi=96,
               engine='auto'):
    """Draw an ``ff.layers`` model's graph (see :func:`ffnumba.layers.plotting.plot_model`)."""
    from .layers.plotting import plot_model as _plot
    return _plot(model, to_file=to_file, show_shapes=show_shapes, rankdir=rankdir, dpi=dpi,
                 engine=engine)
