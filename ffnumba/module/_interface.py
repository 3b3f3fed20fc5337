"""The computation a module implements: MXNet ``BaseModule``'s abstract methods.

:class:`ModuleInterface` declares, with their documentation, the methods and
properties that :class:`~ffnumba.module.Module`, ``BucketingModule``,
``SequentialModule``, ``PythonModule`` and ``SVRGModule`` implement
(``bind``, ``forward``, ``backward``, ``update``, ...).
:class:`~ffnumba.module.BaseModule` derives from it and adds the loops
(``fit``, ``score``, ``predict``) written once over these methods.
"""

__all__ = ['ModuleInterface']


class ModuleInterface:
    """The methods and properties every module implements (each raises NotImplementedError here)."""

    @property
    def data_names(self):
        """list of str: the names of the data inputs, in order."""
        raise NotImplementedError()

    @property
    def output_names(self):
        """list of str: the names of the outputs, in order."""
        raise NotImplementedError()

    @property
    def data_shapes(self):
        """list of DataDesc: the bound data shapes (FFError before ``bind``)."""
        raise NotImplementedError()

    @property
    def label_shapes(self):
        """list of DataDesc or None: the bound label shapes (FFError before ``bind``)."""
        raise NotImplementedError()

    @property
    def output_shapes(self):
        """list of (str, tuple): name and shape of each output (FFError before ``bind``)."""
        raise NotImplementedError()

    # ------------------------------------------------------ computation
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Allocate the executors for these input shapes.

        Parameters
        ----------
        data_shapes : list of (str, tuple) or DataDesc
            Name and shape of each data input; the first axis is the batch.
        label_shapes : list of (str, tuple) or DataDesc, optional
        for_training : bool, default True
            Allocate gradients.
        inputs_need_grad : bool, default False
            Also compute gradients of the data inputs.
        force_rebind : bool, default False
        shared_module : Module, optional
            Share parameter arrays with this bound module.
        grad_req : {'write', 'add', 'null'} or dict, default 'write'

        Raises
        ------
        ShapeError
            Names that differ from ``data_names``/``label_names`` or shapes
            the symbol cannot take.
        """
        raise NotImplementedError()

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the optimizer (and kvstore) that ``update`` will use.

        Parameters
        ----------
        kvstore : str or KVStore, default 'local'
        optimizer : str or Optimizer, default 'sgd'
        optimizer_params : dict or pairs, default (('learning_rate', 0.01),)
            Keyword arguments of the optimizer when ``optimizer`` is a name.
        force_init : bool, default False
            Replace an optimizer already installed.

        Raises
        ------
        FFError
            Before ``bind``/``init_params``; ParamError for an unknown
            optimizer or a bad hyper-parameter.
        """
        raise NotImplementedError()

    def forward(self, data_batch, is_train=None):
        """Run the forward pass on one batch.

        Parameters
        ----------
        data_batch : DataBatch
            ``data`` (and ``label`` when training) arrays in the bound order.
        is_train : bool, optional
            Defaults to ``for_training`` of ``bind``.

        Raises
        ------
        FFError
            Before ``bind``/``init_params``; ShapeError for a batch whose
            arrays do not match the bound shapes.
        """
        raise NotImplementedError()

    def backward(self, out_grads=None):
        """Back-propagate from the last ``forward(is_train=True)``.

        Parameters
        ----------
        out_grads : NDArray or list of NDArray, optional
            Head gradients, one per output; needed only for outputs that
            are not loss layers.
        """
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context=True):
        """The outputs of the last forward pass.

        Parameters
        ----------
        merge_multi_context : bool, default True
            Concatenate the devices' slices along the batch axis; otherwise
            return one list of per-device arrays per output.

        Returns
        -------
        list of NDArray or list of list of NDArray
        """
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (needs ``bind(inputs_need_grad=True)``).

        Parameters
        ----------
        merge_multi_context : bool, default True
            As :meth:`get_outputs`.

        Returns
        -------
        list of NDArray or list of list of NDArray
        """
        raise NotImplementedError()

    def update(self):
        """Apply one optimizer step with the gradients of the last ``backward``.

        Raises
        ------
        FFError
            Before ``init_optimizer``.
        """
        raise NotImplementedError()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` on the current outputs and ``labels``.

        Parameters
        ----------
        eval_metric : EvalMetric
        labels : list of NDArray
            One array per label, the whole batch (or, with ``pre_sliced``,
            one list per device).
        pre_sliced : bool, default False
        """
        raise NotImplementedError()
