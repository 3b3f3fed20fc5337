"""``ff.rnn``: MXNet's ``mx.rnn`` -- recurrent cells, bucketing input, RNN checkpoints.

Cells build symbols: step cells (:class:`RNNCell`, :class:`LSTMCell`,
:class:`GRUCell`) unroll into one node group per time step; a
:class:`FusedRNNCell` unrolls into one fused ``RNN`` node. Stacking,
bidirectional and modifier cells combine them. Names of weights, states and
nodes are MXNet's, so MXNet checkpoints of these models load.
"""
from . import rnn_cell, cells, rnn, io
from .rnn_cell import RNNParams, BaseRNNCell, RNNCell, LSTMCell, GRUCell
from .cells import (FusedRNNCell, SequentialRNNCell, BidirectionalCell, DropoutCell,
                    ModifierCell, ZoneoutCell, ResidualCell)
from .rnn import save_rnn_checkpoint, load_rnn_checkpoint, do_rnn_checkpoint
from .io import encode_sentences, BucketSentenceIter

__all__ = ['RNNParams', 'BaseRNNCell', 'RNNCell', 'LSTMCell', 'GRUCell', 'FusedRNNCell',
           'SequentialRNNCell', 'BidirectionalCell', 'DropoutCell', 'ModifierCell',
           'ZoneoutCell', 'ResidualCell', 'save_rnn_checkpoint', 'load_rnn_checkpoint',
           'do_rnn_checkpoint', 'encode_sentences', 'BucketSentenceIter']
