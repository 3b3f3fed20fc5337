"""The shared register/create registry: names, JSON specs and argument errors."""
import pytest

import ffnumba as ff
from ffnumba.base import ParamError


def test_create_by_name_json_and_instance():
    assert isinstance(ff.metric.create('ACC'), ff.metric.Accuracy)
    init = ff.init.create('["xavier", {"magnitude": 2}]')
    assert isinstance(init, ff.init.Xavier) and init.magnitude == 2
    opt = ff.optimizer.SGD(learning_rate=0.5)
    assert ff.optimizer.create(opt) is opt


@pytest.mark.parametrize('create, name', [(ff.metric.create, 'acc'),
                                          (ff.init.create, 'xavier'),
                                          (ff.optimizer.create, 'sgd')])
def test_unknown_keyword_is_a_param_error(create, name):
    with pytest.raises(ParamError, match='bogus'):
        create(name, bogus=1)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ParamError, match='Valid names: .*accuracy'):
        ff.metric.create('acuracy')
