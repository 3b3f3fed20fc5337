"""Plain numpy (float64) references of every optimizer, written from the published formulas.

``REFS[name]`` is ``(init, step, clip_rule)``: ``init(w, kw) -> list of states``,
``step(w, g, s, lr, wd, t, kw, shared) -> w`` (``s`` updated in place, ``g``
already rescaled and clipped when the rule clips the raw gradient; rules
that fold ``wd`` into the gradient get ``pre=False`` and clip themselves).
"""
import numpy as np


def clip(x, c):
    return np.clip(x, -c, c) if c is not None else x


def _g(g, kw, rule='truthy'):
    c = kw.get('clip_gradient')
    c = (c if c else None) if rule == 'truthy' else c
    return clip(kw.get('rescale_grad', 1.0) * g, c)


def _gwd(g, w, wd, kw, rule='truthy'):
    c = kw.get('clip_gradient')
    c = (c if c else None) if rule == 'truthy' else c
    return clip(kw.get('rescale_grad', 1.0) * g + wd * w, c)


def sgd(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw)
    mu = kw.get('momentum', 0.0)
    if not mu:
        return (1 - lr * wd) * w - lr * gg
    s[0] = mu * s[0] - lr * wd * w - lr * gg
    return w + s[0]


def nag(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw)
    mu = kw.get('momentum', 0.0)
    if not mu:
        return (1 - lr * wd) * w - lr * gg
    m1 = mu * s[0]
    w2 = w - m1 + (1 + mu) * (m1 - lr * (gg + wd * w))
    s[0] = m1 - lr * (gg + wd * w2)   # MXNet's kernel reads the new weight here
    return w2


def signum(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw)
    mu = kw.get('momentum', 0.9)
    if not mu:
        return (1 - lr * wd) * w - lr * np.sign(gg)
    s[0] = mu * s[0] - (1 - mu) * (wd * w + gg)
    return (1 - lr * kw.get('wd_lh', 0.0)) * w + lr * np.sign(s[0])


def sgld(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw, 'not_none')
    noise = sh['rng'].normal(0.0, np.sqrt(lr), size=w.shape).astype(sh['dtype'])
    return w - lr / 2 * (gg + wd * w) + noise


def dcasgd(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw, 'not_none')
    mu, lam = kw.get('momentum', 0.0), kw.get('lamda', 0.04)
    step = -lr * (gg + wd * w + lam * gg * gg * (w - s[1]))
    s[0] = mu * s[0] + step
    s[1] = w.copy()
    return w + s[0]


def adam(w, g, s, lr, wd, t, kw, sh):
    b1, b2, eps = kw.get('beta1', 0.9), kw.get('beta2', 0.999), kw.get('epsilon', 1e-8)
    gg = _gwd(g, w, wd, kw)
    s[0] = b1 * s[0] + (1 - b1) * gg
    s[1] = b2 * s[1] + (1 - b2) * gg ** 2
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - lr_t * s[0] / (np.sqrt(s[1]) + eps)


def adamax(w, g, s, lr, wd, t, kw, sh):
    b1, b2 = kw.get('beta1', 0.9), kw.get('beta2', 0.999)
    gg = _gwd(g, w, wd, kw, 'not_none')
    s[0] = b1 * s[0] + (1 - b1) * gg
    s[1] = np.maximum(b2 * s[1], np.abs(gg))
    return w - lr / (1 - b1 ** t) * s[0] / s[1]


def nadam(w, g, s, lr, wd, t, kw, sh):
    b1, b2, eps = kw.get('beta1', 0.9), kw.get('beta2', 0.999), kw.get('epsilon', 1e-8)
    sd = kw.get('schedule_decay', 0.004)
    gg = _gwd(g, w, wd, kw, 'not_none')
    mu_t = b1 * (1 - 0.5 * 0.96 ** (t * sd))
    mu_t1 = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * sd))
    sh['m_schedule'] = sh.get('m_schedule', 1.0) * mu_t   # one product for all parameters
    m_next = sh['m_schedule'] * mu_t1
    s[0] = b1 * s[0] + (1 - b1) * gg
    s[1] = b2 * s[1] + (1 - b2) * gg ** 2
    m_bar = (1 - mu_t) * gg / (1 - sh['m_schedule']) + mu_t1 * s[0] / (1 - m_next)
    return w - lr * m_bar / (np.sqrt(s[1] / (1 - b2 ** t)) + eps)


def ftml(w, g, s, lr, wd, t, kw, sh):
    b1, b2, eps = kw.get('beta1', 0.6), kw.get('beta2', 0.999), kw.get('epsilon', 1e-8)
    gg = _gwd(g, w, wd, kw)
    s[1] = b2 * s[1] + (1 - b2) * gg ** 2
    d = (1 - b1 ** t) / lr * (np.sqrt(s[1] / (1 - b2 ** t)) + eps)
    s[2] = b1 * s[2] + (1 - b1) * gg - (d - b1 * s[0]) * w
    s[0] = d
    return -s[2] / d


def adagrad(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw, 'not_none')
    s[0] = s[0] + gg ** 2
    return w - lr * (gg / np.sqrt(s[0] + kw.get('eps', 1e-7)) + wd * w)


def rmsprop(w, g, s, lr, wd, t, kw, sh):
    g1, g2, eps = kw.get('gamma1', 0.9), kw.get('gamma2', 0.9), kw.get('epsilon', 1e-8)
    gg = _gwd(g, w, wd, kw)
    s[0] = (1 - g1) * gg ** 2 + g1 * s[0]
    if kw.get('centered'):
        s[1] = (1 - g1) * gg + g1 * s[1]
        s[2] = g2 * s[2] - lr * gg / np.sqrt(s[0] - s[1] ** 2 + eps)
        w = w + s[2]
    else:
        w = w - lr * gg / np.sqrt(s[0] + eps)
    cw = kw.get('clip_weights')
    return clip(w, cw) if cw else w


def adadelta(w, g, s, lr, wd, t, kw, sh):
    rho, eps = kw.get('rho', 0.9), kw.get('epsilon', 1e-5)
    gg = _g(g, kw, 'not_none')
    s[0] = rho * s[0] + (1 - rho) * gg ** 2
    delta = np.sqrt(s[1] + eps) / np.sqrt(s[0] + eps) * gg
    s[1] = rho * s[1] + (1 - rho) * delta ** 2
    return w - delta - wd * w


def ftrl(w, g, s, lr, wd, t, kw, sh):
    lam, beta = kw.get('lamda1', 0.01), kw.get('beta', 1.0)
    gg = _g(g, kw)
    z, n = s
    z = z + gg - (np.sqrt(n + gg ** 2) - np.sqrt(n)) * w / lr
    n = n + gg ** 2
    s[0], s[1] = z, n
    return (np.sign(z) * lam - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lam)


def lamb(w, g, s, lr, wd, t, kw, sh):
    gg = _g(g, kw)
    b1, b2 = kw.get('beta1', 0.9), kw.get('beta2', 0.999)
    s[0] = b1 * s[0] + (1 - b1) * gg
    s[1] = b2 * s[1] + (1 - b2) * gg * gg
    bc = kw.get('bias_correction', True)
    m = s[0] / (1 - b1 ** t) if bc else s[0]
    v = s[1] / (1 - b2 ** t) if bc else s[1]
    d = m / (np.sqrt(v) + kw.get('epsilon', 1e-6)) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(d)
    if kw.get('lower_bound'):
        r1 = max(r1, kw['lower_bound'])
    if kw.get('upper_bound'):
        r1 = min(r1, kw['upper_bound'])
    return w - (lr * r1 / r2 if r1 and r2 else lr) * d


def lars(w, g, s, lr, wd, t, kw, sh):
    wn = np.linalg.norm(w)
    gn = np.linalg.norm(g) * kw.get('rescale_grad', 1.0)
    if wn > 0 and gn > 0:
        lr = lr * kw.get('eta', 0.001) * wn / (gn + wd * wn + kw.get('eps', 0.0))
    return sgd(w, g, s, lr, wd, t, kw, sh)


def _zeros(k):
    return lambda w, kw: [np.zeros_like(w) for _ in range(k)]


REFS = {
    'sgd': (_zeros(1), sgd), 'ccsgd': (_zeros(1), sgd), 'nag': (_zeros(1), nag),
    'signum': (_zeros(1), signum), 'sgld': (_zeros(0), sgld),
    'dcasgd': (lambda w, kw: [np.zeros_like(w), w.copy()], dcasgd),
    'adam': (_zeros(2), adam), 'adamax': (_zeros(2), adamax), 'nadam': (_zeros(2), nadam),
    'ftml': (_zeros(3), ftml), 'adagrad': (_zeros(1), adagrad), 'rmsprop': (_zeros(3), rmsprop),
    'adadelta': (_zeros(2), adadelta), 'ftrl': (_zeros(2), ftrl),
    'lamb': (_zeros(2), lamb), 'lars': (_zeros(1), lars),
}
#: default learning rates (MXNet's constructor defaults differ per optimizer).
DEFAULT_LR = {'signum': 0.01, 'adam': 0.001, 'adamax': 0.002, 'nadam': 0.001, 'rmsprop': 0.001,
              'ftrl': 0.1, 'lamb': 0.001}


def run_reference(name, kw, w0s, grads, dtype, seed=0):
    """Final float64 weights after ``len(grads)`` steps over several parameters.

    ``kw`` holds the optimizer's keyword arguments; parameters are updated in
    index order each step, as an Updater does.
    """
    init, step = REFS[name]
    lr = kw.get('learning_rate', DEFAULT_LR.get(name, 0.01))
    wd = kw.get('wd', 0.0)
    shared = {'rng': np.random.default_rng(seed), 'dtype': dtype}
    ws = [np.asarray(w, np.float64) for w in w0s]
    states = [init(w, kw) for w in ws]
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            ws[i] = step(ws[i], np.asarray(g, np.float64), states[i], lr, wd, t, kw, shared)
    return ws
