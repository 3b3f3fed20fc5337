"""Whole-model saving, weight files and get_config/from_config round trips."""
import json
import os

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.base import FFError


def _data():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(96, 1, 6, 6)).astype(np.float32)
    y = rng.randint(0, 4, 96)
    return X, y


def _net():
    net = L.Sequential([L.Input(shape=(1, 6, 6)), L.Conv2D(4, 3, activation='relu'),
                        L.BatchNormalization(), L.Flatten(), L.Dense(8, activation='tanh'),
                        L.Dense(4, activation='softmax')], name='small')
    net.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['acc'],
                learning_rate=0.01)
    return net


def test_save_load_continue_equals_uninterrupted(tmp_path):
    X, y = _data()
    ff.random.seed(3)
    whole = _net()
    h_whole = whole.fit(X, y, batch_size=32, epochs=4, shuffle=False, verbose=0)
    ff.random.seed(3)
    first = _net()
    first.fit(X, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
    path = str(tmp_path / 'small.ffmodel')
    first.save(path)
    assert sorted(os.listdir(path)) == ['config.json', 'model.params', 'optimizer.states']
    assert not [f for f in os.listdir(tmp_path) if f != 'small.ffmodel']   # no temp left
    loaded = L.load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), first.predict(X))
    h_rest = loaded.fit(X, y, batch_size=32, epochs=4, initial_epoch=2, shuffle=False,
                        verbose=0)
    assert h_rest.epoch == [2, 3]
    np.testing.assert_allclose(h_rest.history['loss'], h_whole.history['loss'][2:], rtol=1e-6)
    for a, b in zip(loaded.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # the files are plain JSON and MXNet arrays: nothing pickled
    doc = json.load(open(os.path.join(path, 'config.json')))
    assert doc['model']['class_name'] == 'Sequential'
    params = ff.nd.load(os.path.join(path, 'model.params'))
    assert 'arg:dense0_weight' in params and 'aux:batchnorm0_moving_var' in params
    assert open(os.path.join(path, 'optimizer.states'), 'rb').read(1) != b'\x80'
    # resuming with another batch size rescales the gradient for it, keeping the states
    other = L.load_model(path)
    other.fit(X, y, batch_size=48, epochs=3, initial_epoch=2, verbose=0)
    assert other._live_optimizer().rescale_grad == pytest.approx(1 / 48)
    assert other._live_optimizer().num_update == 2 * 3 + 2
    # overwrite in place works, overwrite=False refuses
    loaded.save(path)
    with pytest.raises(FFError, match='overwrite'):
        loaded.save(path, overwrite=False)
    with pytest.raises(FFError, match='config.json'):
        L.load_model(str(tmp_path / 'nothing'))


def test_weights_files_and_to_symbol_for_mxnet(tmp_path):
    X, y = _data()
    net = _net()
    net.fit(X, y, batch_size=32, epochs=1, verbose=0)
    f = str(tmp_path / 'w.params')
    net.save_weights(f)
    other = _net()
    other.load_weights(f)
    np.testing.assert_array_equal(other.predict(X), net.predict(X))
    sym = net.to_symbol()
    arg = {k[4:]: v for k, v in ff.nd.load(f).items() if k.startswith('arg:')}
    aux = {k[4:]: v for k, v in ff.nd.load(f).items() if k.startswith('aux:')}
    mod = ff.mod.Module(sym, label_names=['softmax_label'])
    mod.bind([('data', (96, 1, 6, 6))], for_training=False)
    mod.set_params(arg, aux)
    mod.forward(ff.io.DataBatch([ff.nd.array(X)]), is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), net.predict(X), rtol=1e-6)


def _every_layer():
    return [L.Dense(3, activation='relu', use_bias=False, flatten=True, name='d',
                    input_shape=(4,)),
            L.Activation('tanh'), L.LeakyReLU(0.2), L.Dropout(0.3), L.Flatten(),
            L.Reshape((2, -1)), L.Embedding(10, 4), L.BatchNormalization(momentum=0.9),
            L.Concatenate(axis=1),
            L.Conv1D(2, 3, padding='same'), L.Conv2D(2, (3, 1), strides=2, groups=2),
            L.Conv2DTranspose(2, 3, strides=2, output_padding=1),
            L.MaxPool2D(3, strides=1), L.AvgPool2D(2, padding='same'), L.GlobalAvgPool2D(),
            L.Conv2D(3, 3, data_format='channels_last'), L.Conv1DTranspose(2, 3, strides=2),
            L.MaxPool1D(2), L.AvgPool1D(3, strides=1, data_format='channels_last'),
            L.GlobalMaxPool2D(data_format='channels_last'), L.ZeroPadding2D(((1, 2), (0, 1))),
            L.Cropping2D((1, 2)), L.UpSampling2D((2, 3)), L.Permute((2, 1)),
            L.RepeatVector(3), L.Add(), L.Multiply(), L.Average(),
            L.LayerNormalization(epsilon=1e-5, center=False)]


@pytest.mark.parametrize('layer', _every_layer(), ids=lambda la: type(la).__name__)
def test_every_layer_config_round_trip(layer):
    cfg = layer.get_config()
    again = type(layer).from_config(json.loads(json.dumps(cfg)))
    assert again.get_config() == cfg
    layer.trainable = False
    frozen = type(layer).from_config(layer.get_config())
    assert frozen.trainable is False


def test_every_registered_layer_has_a_round_trip_case():
    """Every layer of core, conv and reshaping (other modules add their own cases)."""
    tested = {type(la).__name__ for la in _every_layer()}
    ours = {name for name, cls in L.LAYERS.items() if cls.__module__.rsplit('.', 1)[-1] in
            ('core', 'conv', 'reshaping')}
    assert ours - tested == set()


def test_functional_model_config_round_trip():
    a, b = L.Input(shape=(4,)), L.Input(shape=(3,), name='side')
    h = L.Concatenate()([L.Dense(5, name='left')(a), L.Dense(5)(b)])
    model = L.Model([a, b], [L.Dense(2)(h), L.Dense(1, activation='sigmoid')(h)], name='two')
    again = L.model_from_json(model.to_json())
    assert again.to_symbol(with_loss=False).tojson() == model.to_symbol(with_loss=False).tojson()
    assert again.get_config() == json.loads(json.dumps(model.get_config()))
