"""MXNet's JSON graph format, read and written byte-for-byte as MXNet 1.9.1 does.

Layout (``prefix-symbol.json``): ``nodes`` in topological order, each with
``op`` (``"null"`` for a variable), ``name``, ``attrs`` (strings, sorted,
omitted when empty) and ``inputs`` as ``[node, output, version]`` (version 1
for an auxiliary-state input); ``arg_nodes`` (every variable);
``node_row_ptr`` (prefix sums of output counts, hidden outputs included);
``heads``; ``attrs.mxnet_version``. Old files with ``param``/``attr`` keys
and files without ``node_row_ptr`` load too.

The writer follows dmlc's JSON writer: objects and arrays longer than 10
(or dicts with more than one key) span lines, 2 spaces per level, ``", "``
before each line break.
"""
import json as _json
import os

from ..attribute import normalize_key
from ..base import FFError
from ..ops.registry import get_op
from .graph import Node, GraphView

__all__ = ['to_json', 'from_json', 'save_file', 'load_file', 'MXNET_VERSION']

#: The version this package writes (MXNet 1.9.1).
MXNET_VERSION = 10901


def _str(s):
    out = ['"']
    for ch in s:
        if ch == '\r':
            out.append('\\r')
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\\':
            out.append('\\\\')
        elif ch == '\t':
            out.append('\\t')
        elif ch == '"':
            out.append('\\"')
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


class _Writer:
    """A tiny clone of dmlc::JSONWriter's formatting."""

    def __init__(self):
        self.parts = []
        self.multi = []
        self.count = []

    def sep(self):
        if not self.multi or self.multi[-1]:
            self.parts.append('\n' + ' ' * (2 * len(self.multi)))

    def begin(self, ch, multi):
        self.parts.append(ch)
        self.multi.append(multi)
        self.count.append(0)

    def end(self, ch):
        n = self.count.pop()
        multi = self.multi[-1]
        self.multi.pop()
        if multi and n:
            self.sep()
        self.parts.append(ch)

    def item(self):
        if self.count[-1]:
            self.parts.append(', ')
        self.count[-1] += 1
        self.sep()

    def key(self, k):
        if self.count[-1]:
            self.parts.append(', ')
        self.sep()
        self.parts.append(_str(k) + ': ')
        self.count[-1] += 1

    def value(self, v):
        if isinstance(v, str):
            self.parts.append(_str(v))
        elif isinstance(v, bool):
            self.parts.append('true' if v else 'false')
        elif isinstance(v, int):
            self.parts.append(str(v))
        elif isinstance(v, dict):
            self.begin('{', len(v) > 1)
            for k, x in v.items():
                self.key(k)
                self.value(x)
            self.end('}')
        elif isinstance(v, _Obj):
            self.begin('{', True)
            for k, x in v.items:
                self.key(k)
                self.value(x)
            self.end('}')
        elif isinstance(v, (list, tuple)):
            multi = len(v) > 10 if not isinstance(v, _MultiList) else True
            self.begin('[', multi)
            for x in v:
                self.item()
                self.value(x)
            self.end(']')
        else:
            raise TypeError('cannot write %r' % (v,))


class _Obj:
    """An object always written over several lines, keys in the given order."""

    def __init__(self, items):
        self.items = items


class _MultiList(list):
    """A list always written over several lines."""


def graph_dict(symbol):
    """The JSON document of ``symbol`` as nested Python values (MXNet key order)."""
    view = GraphView(symbol._outputs)
    nodes = _MultiList()
    row_ptr = [0]
    aux_set = set(view.aux_nodes)
    for nid, n in enumerate(view.nodes):
        items = [('op', 'null' if n.op is None else n.op.name), ('name', n.name)]
        attrs = n.json_attrs()
        if attrs:
            items.append(('attrs', dict(sorted(attrs.items()))))
        nargs = n.num_args
        inputs = []
        for k, (src, i) in enumerate(n.inputs):
            sid = view.index[id(src)]
            inputs.append([sid, i, 1 if (k >= nargs and sid in aux_set) else 0])
        items.append(('inputs', inputs))
        nodes.append(_Obj(items))
        row_ptr.append(row_ptr[-1] + n.num_outputs() + n.num_hidden_outputs())
    arg_nodes = [i for i, n in enumerate(view.nodes) if n.op is None]
    heads = [[view.index[id(n)], i, 0] for n, i in symbol._outputs]
    return _Obj([('nodes', nodes), ('arg_nodes', arg_nodes), ('node_row_ptr', row_ptr),
                 ('heads', heads), ('attrs', {'mxnet_version': ['int', MXNET_VERSION]})])


def to_json(symbol):
    """MXNet JSON text of ``symbol``."""
    w = _Writer()
    w.value(graph_dict(symbol))
    return ''.join(w.parts)


def _node_attrs(jn):
    attrs = {}
    for key in ('param', 'attr', 'attrs'):
        d = jn.get(key)
        if d:
            if not isinstance(d, dict):
                raise FFError('node %r: `%s` must be an object' % (jn.get('name'), key))
            attrs.update({str(k): str(v) for k, v in d.items()})
    return attrs


def _user_attrs(attrs):
    """Hidden keys in their ``__key__`` form (old files wrote ``lr_mult``)."""
    return {normalize_key(k): v for k, v in attrs.items()}


def from_json(json_str, source='JSON string'):
    """The output entries ``[(node, index)]`` of the graph in MXNet JSON text.

    :func:`ffnumba.symbol.load_json` wraps them in a Symbol (this module
    works on graph nodes only and never imports the Symbol class).

    Raises
    ------
    FFError
        For text that is not a symbol graph or that names an unknown operator.
    """
    try:
        doc = _json.loads(json_str)
    except (ValueError, TypeError) as e:
        raise FFError('Cannot load symbol from %s: not valid JSON (%s)' % (source, e)) from None
    except RecursionError:
        raise FFError('Cannot load symbol from %s: the JSON is nested too deeply to be a '
                      'symbol graph' % source) from None
    if not isinstance(doc, dict) or not isinstance(doc.get('nodes'), list) \
            or 'heads' not in doc:
        raise FFError('Cannot load symbol from %s: not an MXNet symbol graph (needs `nodes` '
                      'and `heads`)' % source)
    nodes = []
    try:
        for nid, jn in enumerate(doc['nodes']):
            opname = jn['op']
            name = jn['name']
            attrs = _node_attrs(jn)
            if opname == 'null':
                node = Node(None, name, attrs=_user_attrs(attrs))
            else:
                try:
                    op = get_op(opname)
                except FFError:
                    raise FFError('Cannot load symbol from %s: node %r uses unknown operator '
                                  '%r' % (source, name, opname)) from None
                fields = op.params._fields
                ignored = op.params._ignored
                pvals = {k: v for k, v in attrs.items() if k in fields or k in ignored}
                rest = {k: v for k, v in attrs.items() if k not in pvals}
                try:
                    params = op.parse_params(pvals)
                except FFError as e:
                    raise FFError('Cannot load symbol from %s: node %r: %s'
                                  % (source, name, e)) from None
                node = Node(op, name, params, _user_attrs(rest))
            inputs = []
            for ent in jn.get('inputs', []):
                src = int(ent[0])
                if not 0 <= src < nid:
                    raise FFError('Cannot load symbol from %s: node %r input %r does not '
                                  'refer to an earlier node' % (source, name, ent))
                inputs.append((nodes[src], int(ent[1]) if len(ent) > 1 else 0))
            node.inputs = inputs
            if node.op is not None:
                want = node.num_args + len(node.aux_names())
                if len(inputs) != want:
                    raise FFError('Cannot load symbol from %s: operator %s (%s) has %d inputs, '
                                  'expected %d' % (source, name, node.op.name, len(inputs), want))
            nodes.append(node)
        heads = [(nodes[int(h[0])], int(h[1]) if len(h) > 1 else 0) for h in doc['heads']]
    except FFError:
        raise
    except KeyError as e:
        raise FFError('Cannot load symbol from %s: malformed graph (a node has no %s entry)'
                      % (source, e)) from None
    except (IndexError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise FFError('Cannot load symbol from %s: malformed graph (%s)'
                      % (source, _plain(e))) from None
    for n, i in heads:
        if i >= n.num_outputs():
            raise FFError('Cannot load symbol from %s: head %s output %d does not exist'
                          % (source, n.name, i))
    return heads


def _plain(e):
    """An exception's message without Python's internal wording (index/type names)."""
    if isinstance(e, IndexError):
        return 'a node or head refers to a node that does not exist'
    if isinstance(e, (TypeError, AttributeError)):
        return 'an entry has the wrong type'
    if isinstance(e, RecursionError):
        return 'nested too deeply'
    return 'a bad value: %s' % str(e).split(':')[-1].strip()


def save_file(symbol, fname):
    """Write the JSON of ``symbol`` to ``fname`` atomically (temp file + rename).

    Raises
    ------
    WriteError
        (an FFError and OSError) naming ``fname`` when it cannot be written.
    """
    from ..ndarray.params_io import atomic_write
    atomic_write(fname, [to_json(symbol).encode('utf-8')])


def load_file(fname):
    """The output entries of the graph in an MXNet JSON file, naming the file in any error."""
    if not isinstance(fname, str) and not isinstance(fname, os.PathLike):
        raise TypeError('fname required to be a string')
    try:
        with open(fname, 'r', encoding='utf-8') as f:
            text = f.read()
    except OSError as e:
        raise FFError('Cannot load symbol from file %s: %s' % (fname, e.strerror or e)) from None
    except UnicodeDecodeError as e:
        raise FFError('Cannot load symbol from file %s: not UTF-8 text (%s)' % (fname, e)) \
            from None
    return from_json(text, source='file %s' % fname)
