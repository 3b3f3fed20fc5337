"""A ``sym``-like namespace that builds PyTorch modules, so zoo_nets' builders run on PyTorch.

``benchmarks/zoo.py --torch /path/to/python`` uses it: each ``zoo_nets`` builder is called
with this module in place of ``ffnumba.sym``/``mxnet.sym`` and returns a node; :func:`build`
turns that node's graph into a ``torch.nn.Module`` whose forward returns the logits that
feed ``SoftmaxOutput`` (the training loss is cross-entropy on them, which is what
``SoftmaxOutput`` back-propagates). Layer sizes are inferred on the first call through
PyTorch's lazy modules (``LazyConv2d``, ``LazyLinear``, ``LazyBatchNorm2d``).

Only the operators and parameters ``zoo_nets`` uses are mapped; anything else raises
``NotImplementedError`` so a new builder cannot silently run a different network. The
mapping follows MXNet 1.9.1's defaults: ``Pooling`` with the 'valid' convention
(floor, PyTorch's ``ceil_mode=False``) and padded average pooling counting the pad
(``count_include_pad=True``), ``BatchNorm`` with MXNet's ``momentum=0.9`` (PyTorch's
``momentum=0.1``) and the ``eps`` given, ``LRN`` with MXNet's ``alpha``/``beta``/``knorm``.
Needs PyTorch, which is never an ffnumba dependency.
"""
import torch
from torch import nn

_count = [0]


class Node:
    """One operator call: a module (or a function of its inputs) and its input nodes."""

    def __init__(self, fn, inputs, name=None):
        _count[0] += 1
        self.fn, self.inputs, self.id = fn, list(inputs), _count[0]
        self.name = name or 'n%d' % self.id

    def __add__(self, other):
        return Node(lambda a, b: a + b, [self, other])


def Variable(name, **kwargs):
    return Node(None, [], name=name)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def Convolution(data, num_filter, kernel, stride=(1, 1), pad=(0, 0), num_group=1,
                no_bias=False, name=None, **kwargs):
    _check(kwargs, 'Convolution')
    mod = nn.LazyConv2d(num_filter, _pair(kernel), _pair(stride), _pair(pad),
                        groups=num_group, bias=not no_bias)
    return Node(mod, [data], name)


def BatchNorm(data, fix_gamma=True, eps=1e-3, momentum=0.9, name=None, **kwargs):
    _check(kwargs, 'BatchNorm')
    mod = nn.LazyBatchNorm2d(eps=eps, momentum=1.0 - momentum, affine=True)
    if fix_gamma:
        raise NotImplementedError('BatchNorm(fix_gamma=True) has no PyTorch twin here')
    return Node(mod, [data], name)


_ACTS = {'relu': nn.ReLU, 'tanh': nn.Tanh, 'sigmoid': nn.Sigmoid}


def Activation(data, act_type, name=None, **kwargs):
    _check(kwargs, 'Activation')
    return Node(_ACTS[act_type](), [data], name)


def clip(data, a_min, a_max, name=None, **kwargs):
    _check(kwargs, 'clip')
    if (a_min, a_max) == (0, 6):
        return Node(nn.ReLU6(), [data], name)
    return Node(lambda x: torch.clamp(x, a_min, a_max), [data], name)


def Pooling(data, kernel=(1, 1), stride=None, pad=(0, 0), pool_type='max', global_pool=False,
            name=None, **kwargs):
    _check(kwargs, 'Pooling')
    if global_pool:
        mod = nn.AdaptiveAvgPool2d(1) if pool_type == 'avg' else nn.AdaptiveMaxPool2d(1)
    elif pool_type == 'max':
        mod = nn.MaxPool2d(_pair(kernel), _pair(stride or kernel), _pair(pad))
    else:
        mod = nn.AvgPool2d(_pair(kernel), _pair(stride or kernel), _pair(pad),
                           count_include_pad=True)
    return Node(mod, [data], name)


def LRN(data, alpha=1e-4, beta=0.75, knorm=2, nsize=5, name=None, **kwargs):
    _check(kwargs, 'LRN')
    return Node(nn.LocalResponseNorm(nsize, alpha=alpha, beta=beta, k=knorm), [data], name)


def Flatten(data, name=None, **kwargs):
    _check(kwargs, 'Flatten')
    return Node(nn.Flatten(), [data], name)


def FullyConnected(data, num_hidden, no_bias=False, name=None, **kwargs):
    _check(kwargs, 'FullyConnected')
    return Node(nn.LazyLinear(num_hidden, bias=not no_bias), [nn_flat(data)], name)


def nn_flat(data):
    """MXNet's FullyConnected flattens its input (``flatten=True``)."""
    return Node(nn.Flatten(), [data])


def Dropout(data, p=0.5, name=None, **kwargs):
    _check(kwargs, 'Dropout')
    return Node(nn.Dropout(p), [data], name)


def Concat(*data, dim=1, name=None, **kwargs):
    _check(kwargs, 'Concat')
    return Node(lambda *xs: torch.cat(xs, dim=dim), list(data), name)


def SoftmaxOutput(data, name=None, **kwargs):
    _check(kwargs, 'SoftmaxOutput')
    return Node(None, [data], name='__softmax__')


def _check(kwargs, op):
    if kwargs:
        raise NotImplementedError('%s(%s) is not mapped to PyTorch' % (op, ', '.join(kwargs)))


class Graph(nn.Module):
    """The nodes under a ``SoftmaxOutput`` head, run in creation order; returns logits."""

    def __init__(self, head):
        super().__init__()
        order, seen = [], set()

        def visit(node):
            if node.id in seen:
                return
            seen.add(node.id)
            for i in node.inputs:
                visit(i)
            order.append(node)
        visit(head.inputs[0])
        self.order = order
        self.mods = nn.ModuleList([n.fn for n in order if isinstance(n.fn, nn.Module)])

    def forward(self, data):
        values = {}
        for node in self.order:
            if node.fn is None:
                values[node.id] = data
            else:
                values[node.id] = node.fn(*[values[i.id] for i in node.inputs])
        return values[self.order[-1].id]


def build(head, sample):
    """A ``torch.nn.Module`` for the graph under ``head``, materialised on ``sample``."""
    net = Graph(head)
    with torch.no_grad():
        net(sample)                     # lazy modules take their input sizes here
    return net
