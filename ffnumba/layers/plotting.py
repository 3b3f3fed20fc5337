"""Plots for Keras-style models: training curves and the layer graph (matplotlib, lazily).

``pip install ffnumba[viz]`` brings matplotlib (and the optional graphviz
package). Both functions draw on a bare :class:`matplotlib.figure.Figure`
(no pyplot, no GUI backend needed) and return it.
"""
import os

from ..base import FFError, ShapeError

__all__ = ['plot_history', 'plot_model']


def _figure(width, height):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise FFError('plotting needs matplotlib: pip install ffnumba[viz]') from None
    return Figure(figsize=(width, height))


def plot_history(history, keys=None, to_file=None, title=None):
    """Loss and metrics per epoch, one panel per quantity with its ``val_`` twin.

    Parameters
    ----------
    history : History or dict
        What ``fit`` returned (or its ``.history`` dict).
    keys : list of str, optional
        Quantities to draw (without ``val_``); default: every recorded one
        except ``learning_rate``, loss first.
    to_file : str, optional
        Save the figure there (format from the extension, e.g. ``.png``).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    FFError
        Without matplotlib, or for an empty history.
    """
    values = history.history if hasattr(history, 'history') else dict(history)
    epochs = list(getattr(history, 'epoch', []) or [])
    if not values:
        raise FFError('plot_history: the history is empty (fit for at least one epoch)')
    if keys is None:
        keys = []
        for k in values:
            base = k[4:] if k.startswith('val_') else k
            if base not in keys and base != 'learning_rate':
                keys.append(base)
        keys.sort(key=lambda k: (k != 'loss', k))
    fig = _figure(4.2 * len(keys), 3.4)
    for i, key in enumerate(keys):
        ax = fig.add_subplot(1, len(keys), i + 1)
        for name, style in ((key, '-o'), ('val_' + key, '--s')):
            if name not in values:
                continue
            ys = values[name]
            xs = [e + 1 for e in epochs] if len(epochs) == len(ys) else \
                list(range(1, len(ys) + 1))
            if name.startswith('val_') and len(ys) < len(values.get(key, ys)):
                xs = xs[-len(ys):]
            ax.plot(xs, ys, style, label=name, markersize=3)
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel('epoch')
        ax.set_ylabel(key)
        ax.set_title(key)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if to_file is not None:
        fig.savefig(os.fspath(to_file), dpi=100)
    return fig


def _graph(model, show_shapes):
    """``(nodes, edges)``: ``nodes[i] = (label, depth)``; edges as index pairs."""
    from .. import symbol as S
    tensors = model._nodes()
    names = model._layer_names(tensors)
    out_shapes = {}
    if show_shapes:
        try:
            shapes = model._input_shapes()
            _, _, records, _ = model._build()
            batch = {k: (1,) + tuple(v) for k, v in shapes.items()}
            got = S.Group([r[2] for r in records]).infer_shape(**batch)[1]
            out_shapes = {r[1]: s for r, s in zip(records, got)}
            for k, v in shapes.items():
                out_shapes[k] = (1,) + tuple(v)
        except ShapeError:
            out_shapes = {}
    index, nodes, edges, depth = {}, [], [], {}

    def fmt(shape):
        return '(None, %s)' % ', '.join(str(d) for d in shape[1:]) if shape else '?'

    for t, name in zip(model._inputs, model._input_names()):
        index[t.uid] = len(nodes)
        depth[t.uid] = 0
        label = '%s\nInput' % name
        if name in out_shapes:
            label += '\n%s' % fmt(out_shapes[name])
        nodes.append([label, 0])
    for t in tensors:
        name = names[t.uid]
        depth[t.uid] = 1 + max(depth[i.uid] for i in t.inputs)
        index[t.uid] = len(nodes)
        label = '%s\n%s' % (name, type(t.layer).__name__)
        if name in out_shapes:
            label += '\n%s' % fmt(out_shapes[name])
        nodes.append([label, depth[t.uid]])
        edges += [(index[i.uid], index[t.uid]) for i in t.inputs]
    return nodes, edges


def _plot_graphviz(nodes, edges, to_file, rankdir, dpi):
    import graphviz   # noqa: F401 (raises ImportError when absent)
    from graphviz import Digraph
    dot = Digraph(graph_attr={'rankdir': rankdir, 'dpi': str(dpi)},
                  node_attr={'shape': 'box', 'style': 'rounded,filled', 'fillcolor': '#eef3fb',
                             'fontname': 'Helvetica'})
    for i, (label, _) in enumerate(nodes):
        dot.node(str(i), label)
    for a, b in edges:
        dot.edge(str(a), str(b))
    stem, ext = os.path.splitext(os.fspath(to_file))
    dot.render(stem, format=ext[1:] or 'png', cleanup=True)
    return dot


def plot_model(model, to_file='model.png', show_shapes=True, rankdir='TB', dpi=96,
               engine='auto'):
    """Draw the layer graph: one box per layer with its name, class and output shape.

    Parameters
    ----------
    model : ffnumba.layers.Model
    to_file : str or None, default 'model.png'
        Format from the extension. None only returns the figure.
    show_shapes : bool, default True
        Output shapes (batch shown as None) when the input shapes are known.
    rankdir : 'TB' or 'LR', default 'TB'
        Top to bottom or left to right.
    dpi : int, default 96
    engine : 'auto', 'graphviz' or 'matplotlib', default 'auto'
        'auto' uses graphviz (the Python package and the ``dot`` program)
        when both are there, else matplotlib.

    Returns
    -------
    graphviz.Digraph or matplotlib.figure.Figure
    """
    nodes, edges = _graph(model, show_shapes)
    if engine in ('auto', 'graphviz') and to_file is not None:
        try:
            return _plot_graphviz(nodes, edges, to_file, rankdir, dpi)
        except Exception:   # no graphviz package or no dot executable
            if engine == 'graphviz':
                raise
    levels = {}
    for i, (_, d) in enumerate(nodes):
        levels.setdefault(d, []).append(i)
    n_levels, width = len(levels), max(len(v) for v in levels.values())
    pos = {}
    for d, members in levels.items():
        for k, i in enumerate(members):
            across = (k + 0.5) / len(members) * width
            pos[i] = (across, n_levels - d) if rankdir == 'TB' else (d, width - across)
    tall = rankdir == 'TB'
    fig = _figure(max(3.5, 2.8 * width) if tall else 2.6 * n_levels,
                  1.0 * n_levels + 0.6 if tall else max(2.5, 1.2 * width))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_axis_off()
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    for a, b in edges:
        ax.annotate('', xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle='->', color='#555', shrinkA=18, shrinkB=18))
    for i, (label, _) in enumerate(nodes):
        ax.text(pos[i][0], pos[i][1], label, ha='center', va='center', fontsize=8,
                bbox=dict(boxstyle='round,pad=0.4', fc='#eef3fb', ec='#4a6fa5'))
    if to_file is not None:
        fig.savefig(os.fspath(to_file), dpi=dpi)
    return fig
