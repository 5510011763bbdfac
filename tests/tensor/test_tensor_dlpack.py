"""The DLPack faces: Tensor.__dlpack__ negotiation, the OwnedTensor move, and what consumers see."""

import gc

import numpy as np
import pytest
import zarrpipe
from support.dlpack_ctypes import (
    CPU,
    IS_COPIED,
    READ_ONLY,
    c_strides,
    capsule_bytes,
    dlpack_dtype,
    needs_numpy_negotiation,
    needs_numpy_read_only_flag,
    read_capsule,
)
from zarrpipe import Tensor

VERSIONED = [(1, 0), (1, 3), (2, 0)]
LEGACY = [{}, {"max_version": None}, {"max_version": (0, 8)}]


def grid(dtype="float32") -> np.ndarray:
    return (np.arange(24, dtype=dtype).reshape(4, 6) - 5).astype(dtype)


def address_of(t: Tensor) -> int:
    return t.to_numpy().ctypes.data


def assert_describes(info: dict, src: np.ndarray) -> None:
    """The capsule's tensor metadata matches src (CPU, shape, dtype, row-major)."""
    assert info["device"] == CPU
    assert info["shape"] == src.shape
    assert info["dtype"] == dlpack_dtype(src.dtype)
    if info["strides"] is not None and src.size:
        assert info["strides"] == c_strides(src.shape)


def test_dlpack_device_is_cpu():
    t = Tensor.from_numpy(grid())
    assert tuple(t.__dlpack_device__()) == CPU
    assert tuple(t.into_dlpack().__dlpack_device__()) == CPU


# --- Tensor.__dlpack__: versioned -------------------------------------------------------------


@pytest.mark.parametrize("max_version", VERSIONED)
@pytest.mark.parametrize("copy", [None, False])
def test_versioned_export_is_shared_and_read_only(max_version, copy):
    src = grid()
    t = Tensor.from_numpy(src)
    capsule = t.__dlpack__(max_version=max_version, copy=copy)
    info = read_capsule(capsule)
    assert info["name"] == "dltensor_versioned"
    assert info["version"][0] == 1
    assert info["flags"] == READ_ONLY
    assert info["address"] == address_of(t)
    assert_describes(info, src)
    assert capsule_bytes(capsule) == src.tobytes()


@pytest.mark.parametrize("max_version", VERSIONED)
def test_versioned_copy_is_a_fresh_copy(max_version):
    src = grid()
    t = Tensor.from_numpy(src)
    capsule = t.__dlpack__(max_version=max_version, copy=True)
    info = read_capsule(capsule)
    assert info["name"] == "dltensor_versioned"
    assert info["flags"] == IS_COPIED
    assert info["address"] != address_of(t)
    assert_describes(info, src)
    assert capsule_bytes(capsule) == src.tobytes()


def test_versioned_capsule_per_dtype(sample):
    capsule = Tensor.from_numpy(sample).__dlpack__(max_version=(1, 0))
    assert_describes(read_capsule(capsule), sample)
    assert capsule_bytes(capsule) == sample.tobytes()


# --- Tensor.__dlpack__: legacy ----------------------------------------------------------------


@pytest.mark.parametrize("kwargs", LEGACY, ids=["bare", "None", "0.8"])
@pytest.mark.parametrize("copy", [None, True])
def test_legacy_export_is_always_a_copy(kwargs, copy):
    src = grid()
    t = Tensor.from_numpy(src)
    capsule = t.__dlpack__(copy=copy, **kwargs)
    info = read_capsule(capsule)
    assert info["name"] == "dltensor" and info["flags"] is None
    assert info["address"] != address_of(t)
    assert_describes(info, src)
    assert capsule_bytes(capsule) == src.tobytes()
    t.into_dlpack()  # the legacy copy does not pin the tensor's buffer


@pytest.mark.parametrize("kwargs", LEGACY, ids=["bare", "None", "0.8"])
def test_legacy_export_refuses_copy_false(kwargs):
    t = Tensor.from_numpy(grid())
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False, **kwargs)
    t.into_dlpack()


# --- Tensor.__dlpack__: refusals --------------------------------------------------------------


@pytest.mark.parametrize("max_version", [None, (1, 0)])
@pytest.mark.parametrize("dl_device", [(2, 0), (1, 1), (13, 0)])
def test_other_devices_are_refused_with_buffer_error(max_version, dl_device):
    t = Tensor.from_numpy(grid())
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=max_version, dl_device=dl_device)
    assert read_capsule(t.__dlpack__(max_version=(1, 0), dl_device=CPU))["device"] == CPU


@pytest.mark.parametrize("max_version", [None, (1, 0)])
@pytest.mark.parametrize("stream", [0, 1, 2])
def test_streams_are_refused_with_value_error(max_version, stream):
    t = Tensor.from_numpy(grid())
    with pytest.raises(ValueError):
        t.__dlpack__(stream=stream, max_version=max_version)
    for accepted in (None, -1):
        read_capsule(t.__dlpack__(stream=accepted, max_version=max_version))


def test_refusals_from_owned_tensor_are_not_type_errors():
    owned = Tensor.from_numpy(grid()).into_dlpack()
    with pytest.raises(BufferError):
        owned.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(ValueError):
        owned.__dlpack__(max_version=(1, 0), stream=1)


# --- what NumPy sees --------------------------------------------------------------------------


@needs_numpy_negotiation
def test_from_dlpack_round_trip(sample):
    t = Tensor.from_numpy(sample)
    out = np.from_dlpack(t)
    assert out.dtype == sample.dtype and out.shape == sample.shape
    assert out.ctypes.data == address_of(t)
    np.testing.assert_array_equal(out, sample)


@needs_numpy_read_only_flag
def test_from_dlpack_is_read_only():
    out = np.from_dlpack(Tensor.from_numpy(grid()))
    assert not out.flags.writeable
    with pytest.raises(ValueError):
        out[0, 0] = 1


@needs_numpy_negotiation
def test_from_dlpack_copy_false_is_zero_copy():
    t = Tensor.from_numpy(grid())
    out = np.from_dlpack(t, copy=False, device="cpu")
    assert out.ctypes.data == address_of(t)
    np.testing.assert_array_equal(out, grid())


@needs_numpy_read_only_flag
def test_from_dlpack_copy_true_is_writable_and_independent(sample):
    t = Tensor.from_numpy(sample)
    out = np.from_dlpack(t, copy=True)
    assert out.flags.writeable and out.ctypes.data != address_of(t)
    np.testing.assert_array_equal(out, sample)
    out[...] = out[0, 0]
    np.testing.assert_array_equal(t.to_numpy(), sample)


@needs_numpy_negotiation
def test_edge_shapes_through_from_dlpack(edge_array):
    t = Tensor.from_numpy(edge_array)
    for out in (np.from_dlpack(t), np.from_dlpack(t, copy=True)):
        assert out.shape == edge_array.shape and out.dtype == np.float32
        np.testing.assert_array_equal(out, edge_array)


@needs_numpy_negotiation
def test_exports_repeat_without_consuming():
    t = Tensor.from_numpy(grid())
    outs = [np.from_dlpack(t) for _ in range(5)]
    capsules = [t.__dlpack__(max_version=(1, 0)) for _ in range(5)]
    assert {out.ctypes.data for out in outs} == {read_capsule(c)["address"] for c in capsules}
    del outs, capsules
    gc.collect()
    t.into_dlpack()


# --- OwnedTensor: the writable move -----------------------------------------------------------


def test_owned_tensor_metadata(sample):
    owned = Tensor.from_numpy(sample).into_dlpack()
    assert isinstance(owned, zarrpipe.OwnedTensor)
    assert tuple(owned.shape) == sample.shape and owned.dtype == sample.dtype


@pytest.mark.parametrize("copy", [None, False])
def test_owned_capsule_is_writable_and_zero_copy(copy):
    src = grid()
    t = Tensor.from_numpy(src)
    before = address_of(t)
    capsule = t.into_dlpack().__dlpack__(max_version=(1, 0), copy=copy)
    info = read_capsule(capsule)
    assert info["name"] == "dltensor_versioned"
    assert info["flags"] == 0
    assert info["address"] == before
    assert_describes(info, src)
    assert capsule_bytes(capsule) == src.tobytes()


def test_owned_capsule_copy_true_is_writable():
    src = grid()
    capsule = Tensor.from_numpy(src).into_dlpack().__dlpack__(max_version=(1, 0), copy=True)
    info = read_capsule(capsule)
    assert info["name"] == "dltensor_versioned"
    assert not info["flags"] & READ_ONLY
    assert capsule_bytes(capsule) == src.tobytes()


def test_owned_legacy_capsule_carries_the_data():
    src = grid()
    capsule = Tensor.from_numpy(src).into_dlpack().__dlpack__()
    info = read_capsule(capsule)
    assert info["name"] == "dltensor"
    assert_describes(info, src)
    assert capsule_bytes(capsule) == src.tobytes()


@needs_numpy_read_only_flag
def test_from_dlpack_of_owned_is_the_same_memory_made_writable(sample):
    t = Tensor.from_numpy(sample)
    before = np.from_dlpack(t).ctypes.data
    gc.collect()
    out = np.from_dlpack(t.into_dlpack())
    assert out.ctypes.data == before
    assert out.flags.writeable
    assert out.dtype == sample.dtype
    np.testing.assert_array_equal(out, sample)


@needs_numpy_read_only_flag
def test_writing_the_moved_array_touches_nothing_else():
    src = grid("int32")
    t, twin = Tensor.from_numpy(src), Tensor.from_numpy(src)
    earlier_copy = np.from_dlpack(t, copy=True)
    out = np.from_dlpack(t.into_dlpack())
    out[...] = 77
    out[0, 0] = -1
    assert out[0, 0] == -1 and out[1, 1] == 77
    np.testing.assert_array_equal(src, grid("int32"))
    np.testing.assert_array_equal(twin.to_numpy(), grid("int32"))
    np.testing.assert_array_equal(earlier_copy, grid("int32"))


def test_owned_export_is_one_shot():
    owned = Tensor.from_numpy(grid()).into_dlpack()
    out = np.from_dlpack(owned)
    with pytest.raises(BufferError):
        owned.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError):
        np.from_dlpack(owned)
    np.testing.assert_array_equal(out, grid())


def test_owned_export_is_one_shot_even_if_the_capsule_is_dropped():
    owned = Tensor.from_numpy(grid()).into_dlpack()
    capsule = owned.__dlpack__(max_version=(1, 0))
    del capsule
    gc.collect()
    with pytest.raises(BufferError):
        owned.__dlpack__(max_version=(1, 0))


@needs_numpy_read_only_flag
def test_big_endian_and_strided_inputs_move_out():
    src = np.arange(40, dtype=">i4").reshape(5, 8)[::2, 1::3]
    out = np.from_dlpack(Tensor.from_numpy(src).into_dlpack())
    assert out.dtype == np.dtype("int32") and out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_array_equal(out, src)


# --- torch: a consumer that ignores READ_ONLY -------------------------------------------------


def test_torch_ignores_read_only_but_into_dlpack_is_the_writable_door():
    """torch >= 2.9 imports the read-only versioned export as a writable alias (it drops
    READ_ONLY); users who need to write must use into_dlpack() (zero-copy) or copy=True."""
    torch = pytest.importorskip("torch")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 9):
        pytest.skip("torch < 2.9 does not pass max_version, so it gets a legacy copy")
    src = grid()
    t = Tensor.from_numpy(src)
    address = address_of(t)
    alias = torch.from_dlpack(t)
    assert alias.data_ptr() == address  # shares memory despite READ_ONLY
    with pytest.raises(BufferError, match="buffer is shared"):
        t.into_dlpack()
    del alias
    gc.collect()
    moved = torch.from_dlpack(t.into_dlpack())
    assert moved.data_ptr() == address
    moved += 1
    np.testing.assert_array_equal(moved.numpy(), src + 1)
