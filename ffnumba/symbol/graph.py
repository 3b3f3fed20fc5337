"""Graph nodes and the indexed view every pass works on.

A node is an operator application or a variable. A :class:`GraphView`
numbers the nodes of a symbol in MXNet's order (depth-first post-order from
the heads, inputs in order) and the visible output entries of each node.
"""
from ..base import FFError

__all__ = ['Node', 'GraphView']


class Node:
    """One graph node.

    Attributes
    ----------
    op : OpDef or None
        The operator; ``None`` for a variable.
    name : str
    params : Params or None
        Typed operator parameters (``None`` for a variable).
    attrs : dict of str to str
        For an operator: attributes that are not params (``__ctx_group__``...).
        For a variable: every attribute (``__shape__``, ``__init__``...).
    inputs : list of (Node, int)
        Argument entries followed by auxiliary-state entries.
    """

    __slots__ = ('op', 'name', 'params', 'attrs', 'inputs', '_nargs')

    def __init__(self, op, name, params=None, attrs=None, inputs=()):
        self.op = op
        self.name = name
        self.params = params
        self.attrs = dict(attrs) if attrs else {}
        self.inputs = list(inputs)
        self._nargs = None

    @property
    def is_variable(self):
        return self.op is None

    def arg_names(self):
        """Names of the argument inputs."""
        return [] if self.op is None else list(self.op.list_arguments(self.params))

    def aux_names(self):
        """Names of the auxiliary-state inputs."""
        return [] if self.op is None else list(self.op.list_aux(self.params))

    @property
    def num_args(self):
        if self._nargs is None:
            self._nargs = len(self.arg_names())
        return self._nargs

    def output_names(self):
        """Visible output names, as ``list_outputs`` shows them."""
        if self.op is None:
            return [self.name]
        return ['%s_%s' % (self.name, o) for o in self.op.list_outputs(self.params)]

    def num_outputs(self):
        return 1 if self.op is None else len(self.op.list_outputs(self.params))

    def num_hidden_outputs(self):
        return 0 if self.op is None else int(self.op.hidden_outputs(self.params))

    def json_attrs(self):
        """Every attribute as MXNet stores it (params as strings, then attrs)."""
        if self.op is None:
            return dict(self.attrs)
        out = self.params.to_attrs()
        out.update(self.attrs)
        return out

    def copy(self):
        n = Node(self.op, self.name, self.params, self.attrs, self.inputs)
        return n

    def __repr__(self):
        return '<Node %s %s>' % (self.op.name if self.op else 'null', self.name)


def topo_order(heads):
    """Nodes reachable from ``heads`` (list of nodes), depth-first post-order."""
    order = []
    visited = set()
    for head in heads:
        if id(head) in visited:
            continue
        visited.add(id(head))
        stack = [[head, 0]]
        while stack:
            top = stack[-1]
            node, i = top
            if i < len(node.inputs):
                top[1] = i + 1
                child = node.inputs[i][0]
                if id(child) not in visited:
                    visited.add(id(child))
                    stack.append([child, 0])
            else:
                stack.pop()
                order.append(node)
    return order


class GraphView:
    """Indexed form of a symbol: node ids, entry ids, argument and aux lists.

    Attributes
    ----------
    nodes : list of Node
        Topological order.
    index : dict id(node) -> int
    entry_ptr : list of int
        ``entry_ptr[i]`` is the first entry id of node ``i`` (visible outputs
        only); ``entry_ptr[-1]`` is the number of entries.
    in_entries : list of list of int
        Entry ids of each node's inputs (arguments then aux).
    heads : list of int
        Entry ids of the symbol's outputs.
    arg_nodes, aux_nodes : list of int
        Variable node ids that are arguments / auxiliary states.
    """

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.nodes = topo_order([n for n, _ in outputs])
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        ptr = [0]
        for n in self.nodes:
            ptr.append(ptr[-1] + n.num_outputs())
        self.entry_ptr = ptr
        self.num_entries = ptr[-1]
        aux_vars = set()
        self.in_entries = []
        for n in self.nodes:
            ents = []
            nargs = n.num_args
            for k, (src, idx) in enumerate(n.inputs):
                ents.append(ptr[self.index[id(src)]] + idx)
                if k >= nargs and src.op is None:
                    aux_vars.add(id(src))
            self.in_entries.append(ents)
        self.arg_nodes = []
        self.aux_nodes = []
        for i, n in enumerate(self.nodes):
            if n.op is None:
                (self.aux_nodes if id(n) in aux_vars else self.arg_nodes).append(i)
        self.heads = [ptr[self.index[id(n)]] + idx for n, idx in self.outputs]
        self.entry_node = []
        for i, n in enumerate(self.nodes):
            self.entry_node.extend([i] * n.num_outputs())

    def entry(self, nid, idx=0):
        return self.entry_ptr[nid] + idx

    def arg_names(self):
        return [self.nodes[i].name for i in self.arg_nodes]

    def aux_names(self):
        return [self.nodes[i].name for i in self.aux_nodes]

    def entry_names(self):
        names = []
        for n in self.nodes:
            names.extend(n.output_names())
        return names

    def check_unique_names(self):
        """Raise FFError if two different variables share one name."""
        seen = {}
        for i in self.arg_nodes + self.aux_nodes:
            name = self.nodes[i].name
            if name in seen:
                raise FFError('Symbol: two different variables are both named %r; '
                              'give every input a unique name' % name)
            seen[name] = i
