"""Keras-style declarative layers that build ``ff.sym`` graphs and train through ``Module.fit``.

Example::

    from ffnumba import layers as L
    net = L.Sequential([
        L.Conv2D(20, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Conv2D(50, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Flatten(), L.Dense(500, activation='tanh'), L.Dense(10),
    ], name='lenet')
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'])
    history = net.fit(X, y, batch_size=64, epochs=5, validation_data=(Xv, yv))

The front end adds no kernels and no training loop: layers only declare
their configuration (checked Keras style: ``Dense: `units` must be a
positive int. Received: units=0``) and build operators; names follow MXNet's
auto naming (``dense0_weight``, ``conv2d1_bias``; one counter per layer class
within a model, an explicit ``name=`` wins). Layouts are channels first.

What is not here (compared with Keras): weight sharing (a layer instance is
used once per model), regularizers and per-layer initializers, masking,
``return_state`` in recurrent layers, ``center=False`` in BatchNormalization, several outputs in
``compile``/``fit`` (use ``to_symbol(with_loss=False)`` with ``ff.mod.Module``).
"""
from .base import ACTIVATIONS, Input, KerasTensor, Layer
from .core import (Activation, BatchNormalization, Concatenate, Dense, Dropout, Embedding,
                   Flatten, LeakyReLU, Reshape)
from .conv import AvgPool2D, Conv1D, Conv2D, Conv2DTranspose, GlobalAvgPool2D, MaxPool2D
from .model import Model, Sequential
from .recurrent import GRU, LSTM, Bidirectional, SimpleRNN
from .training import LOSSES, LossMetric

#: Keras names MXNet users also reach for.
MaxPooling2D = MaxPool2D
AveragePooling2D = AvgPool2D
GlobalAveragePooling2D = GlobalAvgPool2D

#: What this front end lacks compared with Keras 3, read by the tests.
UNSUPPORTED = ('weight sharing', 'regularizers', 'per-layer initializers', 'masking',
               'return_state in recurrent layers', 'BatchNormalization(center=False)',
               'several outputs in compile/fit', 'channels_last layouts')

__all__ = ['Input', 'KerasTensor', 'Layer', 'ACTIVATIONS', 'Activation', 'BatchNormalization',
           'Concatenate', 'Dense', 'Dropout', 'Embedding', 'Flatten', 'LeakyReLU', 'Reshape',
           'AvgPool2D', 'Conv1D', 'Conv2D', 'Conv2DTranspose', 'GlobalAvgPool2D', 'MaxPool2D',
           'Model', 'Sequential', 'LOSSES', 'LossMetric', 'MaxPooling2D', 'AveragePooling2D',
           'GlobalAveragePooling2D', 'UNSUPPORTED']
