"""The layers added for Keras users, against numpy; channels_last; Dense's last-axis rule."""
import numpy as np
import pytest

from ffnumba import layers as L
from ffnumba.base import ParamError


def _run(layer_fn, *arrays, train=False):
    """Outputs of a one-layer functional model (identity weights where any)."""
    inputs = [L.Input(shape=a.shape[1:]) for a in arrays]
    out = layer_fn(inputs if len(inputs) > 1 else inputs[0])
    model = L.Model(inputs if len(inputs) > 1 else inputs[0], out)
    model.set_weights([np.ones(s, np.float32) if n.endswith('gamma') else
                       np.zeros(s, np.float32) for n, s in
                       zip(model.weight_names, _shapes(model, arrays))])
    return model.predict(list(arrays) if len(arrays) > 1 else arrays[0])


def _shapes(model, arrays):
    sym = model.to_symbol(with_loss=False)
    shapes = dict(zip(model.input_names, [a.shape for a in arrays]))
    args, _, aux = sym.infer_shape(**shapes)
    table = dict(zip(sym.list_arguments(), args))
    table.update(zip(sym.list_auxiliary_states(), aux))
    return [table[n] for n in model.weight_names]


rng = np.random.RandomState(0)
X4 = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
X3 = rng.normal(size=(2, 3, 8)).astype(np.float32)


def test_padding_cropping_upsampling_against_numpy():
    got = _run(lambda x: L.ZeroPadding2D(((1, 2), (0, 1)))(x), X4)
    np.testing.assert_array_equal(got, np.pad(X4, ((0, 0), (0, 0), (1, 2), (0, 1))))
    got = _run(lambda x: L.Cropping2D(((1, 0), (1, 2)))(x), X4)
    np.testing.assert_array_equal(got, X4[:, :, 1:, 1:-2])
    got = _run(lambda x: L.UpSampling2D((2, 3))(x), X4)
    np.testing.assert_array_equal(got, X4.repeat(2, axis=2).repeat(3, axis=3))
    nhwc = X4.transpose(0, 2, 3, 1)
    got = _run(lambda x: L.UpSampling2D(2, data_format='channels_last')(x), nhwc)
    np.testing.assert_array_equal(got, nhwc.repeat(2, axis=1).repeat(2, axis=2))


def test_pooling_1d_global_max_and_permute_repeat():
    got = _run(lambda x: L.MaxPool1D(2)(x), X3)
    np.testing.assert_array_equal(got, X3.reshape(2, 3, 4, 2).max(axis=3))
    got = _run(lambda x: L.AvgPool1D(2)(x), X3)
    np.testing.assert_allclose(got, X3.reshape(2, 3, 4, 2).mean(axis=3), rtol=1e-6)
    got = _run(lambda x: L.GlobalMaxPool2D()(x), X4)
    np.testing.assert_array_equal(got, X4.max(axis=(2, 3)))
    got = _run(lambda x: L.Permute((3, 1, 2))(x), X4)
    np.testing.assert_array_equal(got, X4.transpose(0, 3, 1, 2))
    vec = X4[:, :, 0, 0]
    got = _run(lambda x: L.RepeatVector(4)(x), vec)
    np.testing.assert_array_equal(got, np.repeat(vec[:, None, :], 4, axis=1))


def test_merges_and_layer_normalization():
    a, b, c = X3, X3 * 2, X3 - 1
    np.testing.assert_allclose(_run(lambda t: L.Add()(t), a, b, c), a + b + c, rtol=1e-6)
    np.testing.assert_allclose(_run(lambda t: L.Multiply()(t), a, b), a * b, rtol=1e-6)
    np.testing.assert_allclose(_run(lambda t: L.Average()(t), a, b, c), (a + b + c) / 3,
                               rtol=1e-6, atol=1e-7)
    got = _run(lambda x: L.LayerNormalization(epsilon=1e-3)(x), X3)
    x64 = X3.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # No L.Input needed: the LayerNorm operator sizes gamma and beta from the data.
    sym = L.Sequential([L.LayerNormalization()]).to_symbol(with_loss=False)
    args, _, _ = sym.infer_shape(**{sym.list_arguments()[0]: (2, 7)})
    assert dict(zip(sym.list_arguments(), args))['layernorm0_gamma'] == (7,)
    np.testing.assert_allclose(_run(lambda x: L.LayerNormalization(center=False,
                                                                   scale=False)(x), X3),
                               want, rtol=1e-5, atol=1e-5)


def test_channels_last_conv_matches_channels_first():
    cf = L.Sequential([L.Input(shape=(3, 4, 5)), L.Conv2D(2, 3, padding='same', name='c'),
                       L.MaxPool2D(2, padding='same'), L.GlobalAvgPool2D()])
    cl = L.Sequential([L.Input(shape=(4, 5, 3)),
                       L.Conv2D(2, 3, padding='same', name='c', data_format='channels_last'),
                       L.MaxPool2D(2, padding='same', data_format='channels_last'),
                       L.GlobalAvgPool2D(data_format='channels_last')])
    weights = [rng.normal(size=(2, 3, 3, 3)).astype(np.float32), np.ones(2, np.float32)]
    cf.set_weights(weights)
    cl.set_weights(weights)
    np.testing.assert_allclose(cl.predict(X4.transpose(0, 2, 3, 1)), cf.predict(X4),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ParamError, match='data_format'):
        L.Conv2D(2, 3, data_format='NHWC')


def test_conv1d_transpose_shape_and_training():
    model = L.Sequential([L.Input(shape=(3, 8)), L.Conv1DTranspose(2, 3, strides=2),
                          L.Flatten(), L.Dense(2)])
    assert '(None, 2, 17)' in model.summary(print_fn=None)
    model.compile(optimizer='adam', loss='mse', learning_rate=0.01)
    y = X3[:, 0, :2]
    h = model.fit(X3, y, batch_size=2, epochs=5, verbose=0)
    assert h.history['loss'][-1] < h.history['loss'][0]


def test_dense_applies_to_last_axis_like_keras_and_flatten_like_mxnet():
    w = rng.normal(size=(4, 8)).astype(np.float32)
    keras = L.Sequential([L.Input(shape=(3, 8)), L.Dense(4)])
    keras.set_weights([w, np.zeros(4, np.float32)])
    np.testing.assert_allclose(keras.predict(X3), X3 @ w.T, rtol=1e-5, atol=1e-6)
    mx = L.Sequential([L.Input(shape=(3, 8)), L.Dense(4, flatten=True)])
    w2 = rng.normal(size=(4, 24)).astype(np.float32)
    mx.set_weights([w2, np.zeros(4, np.float32)])
    np.testing.assert_allclose(mx.predict(X3), X3.reshape(2, 24) @ w2.T, rtol=1e-5, atol=1e-6)


def test_layer_normalization_without_input_trains_once_data_are_seen():
    net = L.Sequential([L.Dense(6), L.LayerNormalization(), L.Dense(2)])
    net.compile(optimizer='adam', loss='mse', learning_rate=0.01)
    X = rng.normal(size=(32, 5)).astype(np.float32)
    h = net.fit(X, X[:, :2], batch_size=8, epochs=3, verbose=0)
    assert h.history['loss'][-1] < h.history['loss'][0]
    ln = net.layers[1]
    assert ln.weight_names == ['layernorm0_gamma', 'layernorm0_beta']
    assert ln.count_params() == 12
    assert not np.allclose(ln.get_weights()[0], 1.0)      # gamma started at 1 and learned
