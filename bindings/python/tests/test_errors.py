"""A failed call raises the class of its status, with libdtrain's message."""
import pytest

import dtrain


def test_unknown_option_key_is_invalid_argument_naming_the_key():
    with pytest.raises(dtrain.InvalidArgumentError) as info:
        dtrain.Mesh("local", 2, bogus=1)
    assert info.value.status == 1
    assert info.value.status_name == "DT_ERR_INVALID_ARGUMENT"
    assert '"bogus"' in info.value.message and "accepted" in info.value.message
    assert isinstance(info.value, ValueError) and isinstance(info.value, dtrain.DtrainError)


def test_param_count_of_a_bad_config_names_the_key():
    with pytest.raises(dtrain.InvalidArgumentError, match="n_layer"):
        dtrain.gpt_param_count(n_layer=-1)
    with pytest.raises(dtrain.InvalidArgumentError, match="bogus"):
        dtrain.gpt_param_count(bogus=1)


def test_unknown_backend_and_dataset_kind():
    with pytest.raises(dtrain.DtrainError, match="backend"):
        dtrain.Mesh("carrier-pigeon", 2)
    with pytest.raises(dtrain.InvalidArgumentError, match="kind"):
        dtrain.Dataset("nonsense")


def test_missing_checkpoint_is_io_error(tmp_path):
    with pytest.raises(dtrain.DtrainIOError) as info:
        dtrain.Model.from_checkpoint(str(tmp_path / "none"))
    assert info.value.status == 5 and isinstance(info.value, OSError)
    assert "none.index.json" in info.value.message


def test_not_found_parameter():
    with dtrain.GPT(preset="gpt-tiny") as model:
        with pytest.raises(dtrain.NotFoundError, match="no.such"):
            model.param("no.such")


def test_wrong_option_value_types():
    with pytest.raises(TypeError, match="accepted value types"):
        dtrain.Mesh("local", 2, dp=[2])
    with pytest.raises(dtrain.InvalidArgumentError):
        dtrain.GPT(preset="gpt-tiny", n_layer="two")


def test_no_cuda_device_is_unsupported():
    assert dtrain.device_count("cuda") == 0 or True  # a GPU machine may have one
    if dtrain.device_count("cuda") == 0:
        with pytest.raises(dtrain.UnsupportedError):
            dtrain.Tensor("f32", (2,), device="cuda:0")


def test_errors_keep_their_message_per_thread():
    import threading
    messages = {}

    def fail(key):
        try:
            dtrain.Mesh("local", 2, **{key: 1})
        except dtrain.InvalidArgumentError as e:
            messages[key] = e.message

    threads = [threading.Thread(target=fail, args=("key%d" % i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all('"%s"' % k in m for k, m in messages.items()) and len(messages) == 8
