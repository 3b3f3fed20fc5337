"""Checkpoints of models built from RNN cells (MXNet ``mx.rnn``).

Fused weights are saved unpacked (one array per gate, the form every cell
type can load) and packed again on load, so a checkpoint written from a
:class:`~ffnumba.rnn.FusedRNNCell` loads into its ``unfuse()``-d cells and back.

Source: MXNet 1.9.1 ``python/mxnet/rnn/rnn.py``.
"""
from ..model import load_checkpoint, save_checkpoint
from .rnn_cell import BaseRNNCell

__all__ = ['save_rnn_checkpoint', 'load_rnn_checkpoint', 'do_rnn_checkpoint']


def _as_list(cells):
    return [cells] if isinstance(cells, BaseRNNCell) else list(cells)


def save_rnn_checkpoint(cells, prefix, epoch, symbol, arg_params, aux_params):
    """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` with unpacked weights.

    Parameters
    ----------
    cells : BaseRNNCell or list of BaseRNNCell
        The cells used by ``symbol``; each unpacks its weights in ``arg_params``.
    prefix : str
    epoch : int
    symbol : Symbol
    arg_params, aux_params : dict of str to NDArray
    """
    for cell in _as_list(cells):
        arg_params = cell.unpack_weights(arg_params)
    save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)


def load_rnn_checkpoint(cells, prefix, epoch):
    """``(symbol, arg_params, aux_params)`` of a checkpoint, weights packed for ``cells``.

    Raises
    ------
    FFError
        For a missing or corrupt file, or weights that do not fit the cells.
    """
    sym, arg, aux = load_checkpoint(prefix, epoch)
    for cell in _as_list(cells):
        arg = cell.pack_weights(arg)
    return sym, arg, aux


def do_rnn_checkpoint(cells, prefix, period=1):
    """An epoch-end callback (``fit(epoch_end_callback=...)``) that saves with
    :func:`save_rnn_checkpoint` every ``period`` epochs.

    Returns
    -------
    callable(iter_no, sym, arg, aux)
    """
    period = int(max(1, period))

    def _callback(iter_no, sym=None, arg=None, aux=None):
        if (iter_no + 1) % period == 0:
            save_rnn_checkpoint(cells, prefix, iter_no + 1, sym, arg, aux)
    return _callback
