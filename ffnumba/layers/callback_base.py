"""The base class of ``ff.layers`` callbacks: Keras 3's hook names (``keras.callbacks.Callback``).

Concrete callbacks live in :mod:`ffnumba.layers.callbacks` and
:mod:`ffnumba.layers.callbacks_monitor`; both import the base from here.
"""

__all__ = ['Callback']

_HOOKS = ('on_train_begin', 'on_train_end', 'on_epoch_begin', 'on_epoch_end',
          'on_train_batch_begin', 'on_train_batch_end', 'on_test_begin', 'on_test_end',
          'on_test_batch_begin', 'on_test_batch_end', 'on_predict_begin', 'on_predict_end',
          'on_predict_batch_begin', 'on_predict_batch_end')


class Callback:
    """Base class: every hook does nothing. Subclass and override the ones you need.

    Attributes
    ----------
    model : Model
        Set by ``fit``/``evaluate``/``predict`` before the first hook.
    params : dict
        ``{'verbose', 'epochs', 'steps'}`` of the current call.
    """

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_begin(self, batch, logs=None):
        """Keras' older name of :meth:`on_train_batch_begin`."""

    def on_batch_end(self, batch, logs=None):
        """Keras' older name of :meth:`on_train_batch_end`."""

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass
