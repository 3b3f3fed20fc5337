"""A plain numpy fused RNN (MXNet's layout and formulas), the reference of the RNN op tests."""
import numpy as np

GATES = {'rnn_relu': 1, 'rnn_tanh': 1, 'lstm': 4, 'gru': 3}


def _sig(x):
    return 1 / (1 + np.exp(-x))


def unpack(mode, L, D, C, H, w, P=None):
    """[(Wx, Wh, bx, bh, Whr)] per layer * D + direction from the packed vector
    (MXNet 1.9.1's rnn_impl.h: per layer and direction Wx, Wh, then LSTMP's Whr (P, H);
    all biases after all weights)."""
    G, off, ws = GATES[mode], 0, []
    S = H if P is None else P
    for l in range(L):
        i = C if l == 0 else D * S
        for _ in range(D):
            wx = w[off:off + G * H * i].reshape(G * H, i)
            off += G * H * i
            wh = w[off:off + G * H * S].reshape(G * H, S)
            off += G * H * S
            whr = None
            if P is not None:
                whr = w[off:off + P * H].reshape(P, H)
                off += P * H
            ws.append([wx, wh, whr])
    for e in ws:
        whr = e.pop()
        e.append(w[off:off + G * H])
        e.append(w[off + G * H:off + 2 * G * H])
        e.append(whr)
        off += 2 * G * H
    assert off == w.size
    return ws


def step(mode, x, h, c, wx, wh, bx, bh, whr=None, clip=None):
    H = c.shape[-1]
    gx = x @ wx.T + bx
    gh = h @ wh.T + bh
    if mode in ('rnn_relu', 'rnn_tanh'):
        a = gx + gh
        h = np.maximum(a, 0) if mode == 'rnn_relu' else np.tanh(a)
        return h, c
    if mode == 'lstm':
        a = gx + gh
        i, f, g, o = _sig(a[:, :H]), _sig(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), _sig(a[:, 3 * H:])
        c = f * c + i * g
        if clip is not None:
            c = np.clip(c, *clip)
        h = o * np.tanh(c)
        return (h if whr is None else h @ whr.T), c
    r = _sig(gx[:, :H] + gh[:, :H])
    z = _sig(gx[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * h, c


def rnn_forward(mode, L, bidirectional, data, parameters, state, state_cell=None, clip=None,
                H=None):
    """(output, final h, final c) of MXNet's fused RNN (no dropout). ``H``: the state size
    when it differs from the state's width (LSTMP: state (L*D, N, P))."""
    T, N, C = data.shape
    D = 2 if bidirectional else 1
    P = None if H is None or H == state.shape[2] else state.shape[2]
    H = state.shape[2] if H is None else H
    ws = unpack(mode, L, D, C, H, parameters, P)
    cell = state_cell if state_cell is not None else np.zeros(state.shape[:2] + (H,))
    hy, cy = np.zeros_like(state), np.zeros_like(cell)
    x = data
    for l in range(L):
        outs = []
        for d in range(D):
            k = l * D + d
            h, c = state[k], cell[k]
            ys = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                h, c = step(mode, x[t], h, c, *ws[k], clip=clip)
                ys[t] = h
            outs.append(np.stack(ys))
            hy[k], cy[k] = h, c
        x = np.concatenate(outs, axis=2)
    return x, hy, cy


def rnn_forward_lengths(mode, L, bidirectional, data, parameters, state, state_cell, lengths,
                        clip=None, H=None):
    """``use_sequence_length``: every sequence run alone over its own first ``lengths[n]``
    steps (outputs past the end 0, final states those at the sequence's last step)."""
    T, N, _ = data.shape
    D = 2 if bidirectional else 1
    S = state.shape[2]
    out = np.zeros((T, N, D * S))
    hy = np.zeros_like(state)
    cy = np.zeros(state.shape[:2] + (S if H is None else H,))
    for n in range(N):
        k = int(lengths[n])
        o, h, c = rnn_forward(mode, L, bidirectional, data[:k, n:n + 1], parameters,
                              state[:, n:n + 1],
                              None if state_cell is None else state_cell[:, n:n + 1], clip, H)
        out[:k, n] = o[:, 0]
        hy[:, n], cy[:, n] = h[:, 0], c[:, 0]
    return out, hy, cy
