"""NameManager, Prefix and AttrScope: counters, nesting, thread locality."""
import threading

import ffnumba.symbol as sym
from ffnumba.attribute import AttrScope
from ffnumba.name import NameManager, Prefix


def test_given_name_wins_and_counters_are_per_hint():
    with NameManager() as nm:
        assert nm.get('mine', 'fc') == 'mine'
        assert [nm.get(None, 'fc'), nm.get(None, 'fc'), nm.get(None, 'conv')] == \
            ['fc0', 'fc1', 'conv0']


def test_managers_nest_and_restore():
    with NameManager():
        outer = NameManager.current
        outer.get(None, 'a')
        with NameManager() as inner:
            assert NameManager.current is inner
            assert inner.get(None, 'a') == 'a0'
        assert NameManager.current is outer
        assert outer.get(None, 'a') == 'a1'


def test_prefix_applies_to_ops_and_their_inputs():
    with NameManager():
        with Prefix('net1_'):
            fc = sym.FullyConnected(sym.Variable('data'), num_hidden=2)
            named = sym.Activation(fc, act_type='relu', name='act')
        assert fc.name == 'net1_fullyconnected0'
        assert named.name == 'net1_act'
        assert fc.list_arguments() == ['data', 'net1_fullyconnected0_weight',
                                       'net1_fullyconnected0_bias']


def test_thread_local_managers_and_scopes():
    results = {}

    def work(key):
        with NameManager():
            with AttrScope(ctx_group=key):
                names = [sym.Activation(sym.Variable('x'), act_type='relu').name
                         for _ in range(50)]
                attrs = sym.Variable('v').list_attr()
        results[key] = (names, attrs)

    threads = [threading.Thread(target=work, args=('g%d' % i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key, (names, attrs) in results.items():
        assert names == ['activation%d' % i for i in range(50)]
        assert attrs == {'__ctx_group__': key, 'ctx_group': key}
