"""Keras-style declarative layers that build ``ff.sym`` graphs and train through ``Module``.

Example::

    from ffnumba import layers as L
    net = L.Sequential([
        L.Input(shape=(1, 28, 28)),
        L.Conv2D(20, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Conv2D(50, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Flatten(), L.Dense(500, activation='tanh'), L.Dense(10),
    ], name='lenet')
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'])
    history = net.fit(X, y, batch_size=64, epochs=5, validation_split=0.1,
                      callbacks=[L.callbacks.EarlyStopping(patience=2)])
    net.save('lenet.ffmodel'); again = L.load_model('lenet.ffmodel')

The front end adds no kernels and no update rule: layers only declare their
configuration (checked Keras style: ``Dense: `units` must be a positive int.
Received: units=0``) and build operators; ``fit`` drives an
``ff.mod.Module`` (bind, init_params, init_optimizer, forward_backward,
update) and calls Keras' callback hooks in between. Names follow MXNet's
auto naming (``dense0_weight``, ``conv2d1_bias``; one counter per layer
class within a model, an explicit ``name=`` wins). Layouts are channels
first (MXNet); conv and pooling layers take ``data_format='channels_last'``
and transpose at their edges.

Where Keras and MXNet differ, Keras wins here: ``Dense`` on input of rank > 2
applies to the last axis (``flatten=False``; MXNet's ``FullyConnected``
flattens by default, ``Dense(..., flatten=True)``), ``fit(epochs=, initial_epoch=)``
counts epochs as Keras does, ``get_weights`` returns a list. Recurrent layers
(``SimpleRNN``, ``LSTM``, ``GRU``, ``Bidirectional``) run the fused ``RNN``
operator; ``return_state`` is not supported.
"""
from . import callbacks
from .base import ACTIVATIONS, LAYERS, Input, KerasTensor, Layer
from .core import (Activation, BatchNormalization, Concatenate, Dense, Dropout, Embedding,
                   Flatten, LeakyReLU, Reshape)
from .conv import (AvgPool1D, AvgPool2D, Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose,
                   GlobalAvgPool2D, GlobalMaxPool2D, MaxPool1D, MaxPool2D)
from .reshaping import (Add, Average, Cropping2D, LayerNormalization, Multiply, Permute,
                        RepeatVector, UpSampling2D, ZeroPadding2D)
from .losses import LOSSES, LossMetric
from .model import Model, Sequential
from .recurrent import GRU, LSTM, Bidirectional, SimpleRNN
from .loading import load_model, model_from_config, model_from_json

#: Keras names MXNet users also reach for.
MaxPooling2D = MaxPool2D
AveragePooling2D = AvgPool2D
GlobalAveragePooling2D = GlobalAvgPool2D
GlobalMaxPooling2D = GlobalMaxPool2D
MaxPooling1D = MaxPool1D
AveragePooling1D = AvgPool1D

#: What this front end lacks compared with Keras 3, read by the tests.
UNSUPPORTED = ('weight sharing', 'regularizers', 'per-layer initializers', 'masking',
               'return_state in recurrent layers', 'BatchNormalization(center=False)',
               'weighted_metrics')

__all__ = ['Input', 'KerasTensor', 'Layer', 'LAYERS', 'ACTIVATIONS', 'Activation',
           'BatchNormalization', 'Concatenate', 'Dense', 'Dropout', 'Embedding', 'Flatten',
           'LeakyReLU', 'Reshape', 'AvgPool2D', 'Conv1D', 'Conv2D', 'Conv2DTranspose',
           'GlobalAvgPool2D', 'MaxPool2D', 'Model', 'Sequential', 'LOSSES', 'LossMetric',
           'MaxPooling2D', 'AveragePooling2D', 'GlobalAveragePooling2D', 'UNSUPPORTED',
           'AvgPool1D', 'MaxPool1D', 'Conv1DTranspose', 'GlobalMaxPool2D', 'GlobalMaxPooling2D',
           'MaxPooling1D', 'AveragePooling1D', 'Add', 'Average', 'Cropping2D',
           'LayerNormalization', 'Multiply', 'Permute', 'RepeatVector', 'UpSampling2D',
           'ZeroPadding2D', 'SimpleRNN', 'LSTM', 'GRU', 'Bidirectional',
           'callbacks', 'load_model', 'model_from_config', 'model_from_json']
