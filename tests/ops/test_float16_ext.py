"""float16 on the CPU for the normalisation, norm and extra math ops (computed in float32)."""
import pytest

import ffnumba as ff

from test_float16 import _compare

d = ff.sym.Variable('data')


@pytest.mark.parametrize('make, shapes, positive', [
    (lambda: ff.sym.LayerNorm(d, name='ln'), {'data': (3, 4)}, False),
    (lambda: ff.sym.GroupNorm(d, num_groups=2, name='gn'), {'data': (2, 4, 3)}, False),
    (lambda: ff.sym.InstanceNorm(d, name='inn'), {'data': (2, 3, 4)}, False),
    (lambda: ff.sym.L2Normalization(d, mode='channel', name='l2'), {'data': (2, 3, 4)}, False),
    (lambda: ff.sym.norm(d, axis=1, name='n'), {'data': (3, 4)}, True),
    (lambda: ff.sym.nansum(d, axis=0, name='n'), {'data': (3, 4)}, False),
    (lambda: ff.sym.softmin(d, name='s'), {'data': (3, 4)}, False),
    (lambda: ff.sym.erfinv(d, name='e'), {'data': (3, 4)}, True),
    (lambda: ff.sym.gammaln(d, name='g'), {'data': (3, 4)}, True),
    (lambda: ff.sym.smooth_l1(d, scalar=2.0, name='s'), {'data': (3, 4)}, True),
    (lambda: ff.sym.broadcast_hypot(d, ff.sym.Variable('r'), name='h'),
     {'data': (3, 4), 'r': (4,)}, True),
])
def test_float16_matches_float32(make, shapes, positive):
    _compare(make(), shapes, positive=positive)
