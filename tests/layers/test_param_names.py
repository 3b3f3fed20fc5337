"""Layer weight names are the names the operators declare in the registry (one home)."""
import pytest

from ffnumba import layers as L
from ffnumba.ops.registry import get_op

CASES = [
    (L.Dense(3), 'FullyConnected', {'num_hidden': 3}),
    (L.Dense(3, use_bias=False, activation='relu'), 'FullyConnected',
     {'num_hidden': 3, 'no_bias': True}),
    (L.Conv2D(4, 3), 'Convolution', {'num_filter': 4, 'kernel': (3, 3)}),
    (L.Conv2DTranspose(2, 3, use_bias=False), 'Deconvolution',
     {'num_filter': 2, 'kernel': (3, 3), 'no_bias': True}),
    (L.Embedding(10, 4), 'Embedding', {'input_dim': 10, 'output_dim': 4}),
    (L.BatchNormalization(), 'BatchNorm', {}),
    (L.MaxPool2D(2), 'Pooling', {'kernel': (2, 2)}),
    (L.Flatten(), 'Flatten', {}),
]


@pytest.mark.parametrize('layer,opname,params', CASES, ids=lambda c: getattr(c, '__name__', None)
                         if not isinstance(c, L.Layer) else type(c).__name__)
def test_weight_names_are_the_registry_arguments(layer, opname, params):
    op = get_op(opname)
    p = op.parse_params(params)
    args = ['d0_%s' % a for a in op.list_arguments(p)[1:]]     # all but the data input
    aux = ['d0_%s' % a for a in op.list_aux(p)]
    assert layer.param_names('d0') == (args, aux)


def test_summary_counts_the_registry_weights():
    net = L.Sequential([L.Dense(5, input_shape=(3,)), L.BatchNormalization(), L.Dense(2)])
    text = net.summary(print_fn=None)
    assert 'Total params: %d' % (3 * 5 + 5 + 4 * 5 + 5 * 2 + 2) in text.replace(',', '')
