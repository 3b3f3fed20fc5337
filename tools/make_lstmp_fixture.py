"""Write the LSTMP (``RNN(projection_size=...)``) forward fixture with real MXNet 1.9.1.

Run once with MXNet's own interpreter (never a dependency of ffnumba or CI)::

    /path/to/mxref/bin/python tools/make_lstmp_fixture.py

MXNet 1.9.1's CPU ``RNN`` runs LSTM with a projection in inference only
("No training support for LSTM with projection on CPU currently"), so the
fixture holds forward results; the gradients are checked against finite
differences in tests/ops/nn/test_rnn.py.

Writes ``tests/data/mx_rnn_lstmp_expected.npz``: for each case ``<k>``
(``CASES[k]``: layers, bidirectional, T, N, C, H, P) the inputs
``<k>_data``, ``<k>_parameters``, ``<k>_state``, ``<k>_state_cell`` and
MXNet's ``<k>_output``, ``<k>_state_output``, ``<k>_statecell_output``;
``<k>_config`` = ``[L, bidirectional, H, P]``.
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data')
CASES = [dict(L=1, bi=False, T=4, N=3, C=5, H=4, P=2),
         dict(L=2, bi=True, T=3, N=2, C=3, H=5, P=3)]


def main():
    import mxnet as mx
    rng = np.random.default_rng(11)
    res = {}
    for k, c in enumerate(CASES):
        s = mx.sym.RNN(mx.sym.var('data'), state_size=c['H'], num_layers=c['L'], mode='lstm',
                       bidirectional=c['bi'], projection_size=c['P'], state_outputs=True,
                       name='r')
        shapes, _, _ = s.infer_shape(data=(c['T'], c['N'], c['C']))
        res['%d_config' % k] = np.array([c['L'], c['bi'], c['H'], c['P']])
        args = {}
        for name, shape in zip(s.list_arguments(), shapes):
            key = name[2:] if name.startswith('r_') else name
            args[name] = rng.uniform(-0.8, 0.8, shape).astype('float32')
            res['%d_%s' % (k, key)] = args[name]
        exe = s.bind(mx.cpu(), {n: mx.nd.array(v) for n, v in args.items()})
        exe.forward(is_train=False)
        for name, out in zip(['output', 'state_output', 'statecell_output'], exe.outputs):
            res['%d_%s' % (k, name)] = out.asnumpy()
    np.savez(os.path.join(OUT, 'mx_rnn_lstmp_expected.npz'), **res)
    print(sorted(res))


if __name__ == '__main__':
    main()
