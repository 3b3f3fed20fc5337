"""History plots and model graphs (matplotlib; graphviz optional)."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import layers as L


def test_plot_history_writes_a_png_with_train_and_val_curves(tmp_path):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    net = L.Sequential([L.Input(shape=(4,)), L.Dense(2)])
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=0.05)
    history = net.fit(X, y, epochs=3, validation_split=0.25, verbose=0,
                      callbacks=[L.callbacks.ReduceLROnPlateau(patience=1)])
    out = tmp_path / 'history.png'
    fig = ff.viz.plot_history(history, to_file=str(out))
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ['loss', 'accuracy']              # learning_rate left out
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ['loss', 'val_loss']
    assert list(lines[0].get_xdata()) == [1, 2, 3]      # epochs numbered from 1
    fig2 = history.plot(keys=['learning_rate'])
    assert fig2.axes[0].get_title() == 'learning_rate'
    with pytest.raises(ff.base.FFError, match='empty'):
        ff.viz.plot_history({})


def test_plot_model_labels_layers_with_names_and_shapes(tmp_path):
    a = L.Input(shape=(1, 8, 8), name='image')
    h = L.Conv2D(4, 3, name='conv')(a)
    left = L.GlobalAvgPool2D()(h)
    right = L.GlobalMaxPool2D()(h)
    out = L.Dense(3, activation='softmax', name='head')(L.Concatenate()([left, right]))
    model = L.Model(a, out)
    path = tmp_path / 'model.png'
    fig = ff.viz.plot_model(model, to_file=str(path), engine='matplotlib')
    assert path.stat().st_size > 1000
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_text()]
    assert 'image\nInput\n(None, 1, 8, 8)' in labels
    assert 'conv\nConv2D\n(None, 4, 6, 6)' in labels
    assert 'head\nDense\n(None, 3)' in labels
    assert len(labels) == 6
