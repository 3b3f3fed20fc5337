"""Update throughput of every optimizer: fused numba kernel vs plain numpy expressions.

Prints parameters per second for one update of a float32 tensor (10M
parameters by default), best of ``--repeat`` runs after a warm-up (compile)
call. The numpy baseline writes the same update as ordinary array
expressions (temporaries and several passes over memory), as a user would.

    python benchmarks/optimizers.py [--size 10000000] [--repeat 3] [--only adam,sgd]

Set ``NUMBA_NUM_THREADS``/``OMP_NUM_THREADS`` to pin the thread count.
"""
import argparse
import time
import warnings

import numpy as np

import ffnumba.ndarray as nd
import ffnumba.optimizer as opt

LR, WD, R, CLIP = 0.01, 1e-4, 0.5, 1.0


def _c(g):
    return np.clip(g, -CLIP, CLIP)


def np_sgd(w, g, s, t):
    m, = s
    m *= 0.9
    m -= LR * WD * w + LR * _c(R * g)
    w += m


def np_nag(w, g, s, t):
    m, = s
    m *= 0.9
    gg = _c(R * g)
    w[:] = w - m + 1.9 * (m - LR * (gg + WD * w))
    m -= LR * (gg + WD * w)


def np_signum(w, g, s, t):
    m, = s
    m[:] = 0.9 * m - 0.1 * (WD * w + _c(R * g))
    w[:] = (1 - LR * 0.0) * w + LR * np.sign(m)


def np_sgld(w, g, s, t):
    w += -LR / 2 * (_c(R * g) + WD * w) + np.random.normal(0, np.sqrt(LR), w.shape).astype(
        np.float32)


def np_dcasgd(w, g, s, t):
    m, prev = s
    gg = _c(R * g)
    m *= 0.9
    m -= LR * (gg + WD * w + 0.04 * gg * gg * (w - prev))
    prev[:] = w
    w += m


def np_adam(w, g, s, t):
    m, v = s
    gg = _c(R * g + WD * w)
    m[:] = 0.9 * m + 0.1 * gg
    v[:] = 0.999 * v + 0.001 * gg * gg
    w -= LR * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)


def np_adamax(w, g, s, t):
    m, u = s
    gg = _c(R * g + WD * w)
    m[:] = 0.9 * m + 0.1 * gg
    u[:] = np.maximum(0.999 * u, np.abs(gg))
    w -= LR / (1 - 0.9 ** t) * m / u


def np_nadam(w, g, s, t):
    m, v = s
    gg = _c(R * g + WD * w)
    mu_t, mu_t1, ms = 0.45, 0.45, 0.45
    m[:] = 0.9 * m + 0.1 * gg
    v[:] = 0.999 * v + 0.001 * gg * gg
    m_bar = (1 - mu_t) * gg / (1 - ms) + mu_t1 * m / (1 - ms * mu_t1)
    w -= LR * m_bar / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)


def np_ftml(w, g, s, t):
    d, v, z = s
    gg = _c(R * g + WD * w)
    v[:] = 0.999 * v + 0.001 * gg * gg
    dt = (1 - 0.6 ** t) / LR * (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    z[:] = 0.6 * z + 0.4 * gg - (dt - 0.6 * d) * w
    d[:] = dt
    w[:] = -z / dt


def np_adagrad(w, g, s, t):
    h, = s
    gg = _c(R * g)
    h += gg * gg
    w -= LR * (gg / np.sqrt(h + 1e-7) + WD * w)


def np_rmsprop(w, g, s, t):
    n, = s
    gg = _c(R * g + WD * w)
    n[:] = 0.1 * gg * gg + 0.9 * n
    w -= LR * gg / np.sqrt(n + 1e-8)


def np_adadelta(w, g, s, t):
    ag, ad = s
    gg = _c(R * g)
    ag[:] = 0.9 * ag + 0.1 * gg * gg
    delta = np.sqrt(ad + 1e-5) / np.sqrt(ag + 1e-5) * gg
    ad[:] = 0.9 * ad + 0.1 * delta * delta
    w -= delta + WD * w


def np_ftrl(w, g, s, t):
    z, n = s
    gg = _c(R * g)
    z += gg - (np.sqrt(n + gg * gg) - np.sqrt(n)) * w / 0.1
    n += gg * gg
    w[:] = (np.sign(z) * 0.01 - z) / ((1 + np.sqrt(n)) / 0.1 + WD) * (np.abs(z) > 0.01)


CASES = [
    ('sgd', dict(momentum=0.9), np_sgd, 1), ('nag', dict(momentum=0.9), np_nag, 1),
    ('signum', {}, np_signum, 1), ('sgld', {}, np_sgld, 0),
    ('dcasgd', dict(momentum=0.9), np_dcasgd, 2), ('adam', {}, np_adam, 2),
    ('adamax', {}, np_adamax, 2), ('nadam', {}, np_nadam, 2), ('ftml', {}, np_ftml, 3),
    ('adagrad', {}, np_adagrad, 1), ('rmsprop', {}, np_rmsprop, 1),
    ('adadelta', {}, np_adadelta, 2), ('ftrl', {}, np_ftrl, 2),
]


def _best(fn, repeat):
    fn()  # warm-up: compile / first touch
    best = float('inf')
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--size', type=int, default=10_000_000)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--only', default='')
    args = ap.parse_args()
    only = set(filter(None, args.only.split(',')))
    rng = np.random.default_rng(0)
    w0 = rng.uniform(-1, 1, args.size).astype(np.float32)
    g = rng.uniform(-1, 1, args.size).astype(np.float32)
    print('%-9s %14s %14s %8s' % ('optimizer', 'fused param/s', 'numpy param/s', 'speedup'))
    for name, kw, np_fn, nstate in CASES:
        if only and name not in only:
            continue
        o = opt.create(name, learning_rate=LR, wd=WD, rescale_grad=R, clip_gradient=CLIP, **kw)
        w, gn = nd.array(w0), nd.array(g)
        state = o.create_state(0, w)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            fused = _best(lambda: o.update(0, w, gn, state), args.repeat)
        wn = w0.copy()
        sn = [np.full_like(w0, 1e-3) for _ in range(nstate)]
        counter = [0]

        def run_np():
            counter[0] += 1
            np_fn(wn, g, sn, counter[0])
        with np.errstate(all='ignore'):
            plain = _best(run_np, args.repeat)
        print('%-9s %14.3e %14.3e %7.1fx' % (name, args.size / fused, args.size / plain,
                                              plain / fused))


if __name__ == '__main__':
    main()
