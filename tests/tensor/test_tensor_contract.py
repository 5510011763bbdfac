"""The Tensor ownership contract: read-only shared faces, the into_dlpack() move, the tombstone."""

import ctypes
import gc
import re

import numpy as np
import pytest
import zarrpipe
from support.dlpack_ctypes import capsule_bytes, needs_numpy_negotiation, needs_numpy_read_only_flag
from zarrpipe import Tensor

SHARED_MESSAGE = (
    "Tensor buffer is shared; cannot move out for a writable export. "
    "Use __dlpack__(copy=True) for a writable copy."
)

PyBUF_WRITABLE = 0x0001
PyBUF_FULL_RO = 0x011C  # what memoryview() asks for
PyBUF_FULL = PyBUF_FULL_RO | PyBUF_WRITABLE


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def request_buffer(obj, flags: int) -> None:
    """Ask obj for a buffer with PyBUF_* flags, then release it; raises what the exporter raises."""
    view = _PyBuffer()
    _get_buffer(obj, ctypes.byref(view), flags)
    _release_buffer(ctypes.byref(view))


def grid(dtype="uint16") -> np.ndarray:
    return np.arange(35, dtype=dtype).reshape(5, 7)


# --- construction and metadata ---------------------------------------------------------------


def test_from_numpy_copies_the_input():
    src = grid("int32")
    t = Tensor.from_numpy(src)
    assert t.to_numpy().ctypes.data != src.ctypes.data
    src[...] = -1
    np.testing.assert_array_equal(t.to_numpy(), grid("int32"))
    assert isinstance(t.into_dlpack(), zarrpipe.OwnedTensor)  # unique although src is still alive


def test_metadata(sample):
    t = Tensor.from_numpy(sample)
    assert type(t.shape) is tuple and all(type(n) is int for n in t.shape)
    assert t.shape == (3, 5)
    assert isinstance(t.dtype, np.dtype) and t.dtype == sample.dtype
    assert t.ndim == 2
    assert t.nbytes == sample.nbytes


def assert_repr_names_shape_and_dtype(t: Tensor) -> None:
    text = repr(t)
    assert all(str(extent) in text for extent in t.shape), text
    assert str(t.dtype) in text or t.dtype.str in text, text


def test_repr_mentions_shape_and_dtype():
    t = Tensor.from_numpy(np.zeros((7, 11), dtype=np.uint16))
    assert t.shape == (7, 11) and t.dtype == np.uint16
    assert_repr_names_shape_and_dtype(t)


@pytest.mark.parametrize("dtype", [">i4", ">u2", ">f8", ">c16", ">i8"])
def test_big_endian_input_becomes_native(dtype):
    src = (np.arange(12) - 5).reshape(3, 4).astype(dtype)
    t = Tensor.from_numpy(src)
    assert t.dtype == src.dtype.newbyteorder("=") and t.dtype.isnative
    for face in (t.to_numpy(), np.asarray(memoryview(t)), np.from_dlpack(t)):
        assert face.dtype.isnative
        np.testing.assert_array_equal(face, src)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::2, ::3],
        lambda a: a.T,
        lambda a: np.asfortranarray(a),
        lambda a: a[:, ::-1],
        lambda a: a[1:, 2:5],
    ],
    ids=["step", "transpose", "fortran", "reversed", "offset"],
)
def test_non_contiguous_input_is_copied_to_c_order(view):
    src = view(np.arange(48, dtype=np.int64).reshape(6, 8))
    t = Tensor.from_numpy(src)
    assert t.shape == src.shape
    out = t.to_numpy()
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, src)
    assert bytes(t.buffer()) == np.ascontiguousarray(src).tobytes()
    assert memoryview(t).c_contiguous


# --- read-only faces ---------------------------------------------------------------------------


def test_to_numpy_round_trip(sample):
    out = Tensor.from_numpy(sample).to_numpy()
    assert out.dtype == sample.dtype and out.shape == sample.shape
    np.testing.assert_array_equal(out, sample)


def test_memoryview_round_trip(sample):
    t = Tensor.from_numpy(sample)
    with memoryview(t) as view:
        assert view.readonly
        assert view.shape == sample.shape and view.ndim == 2
        assert view.itemsize == sample.itemsize and view.nbytes == sample.nbytes
        assert view.c_contiguous
        decoded = np.asarray(view)  # NumPy parses the PEP 3118 format string
        assert decoded.dtype == sample.dtype
        np.testing.assert_array_equal(decoded, sample)
        del decoded


def test_buffer_is_raw_bytes(sample):
    with Tensor.from_numpy(sample).buffer() as raw:
        assert raw.readonly and raw.ndim == 1 and raw.format == "B"
        assert raw.nbytes == sample.nbytes
        assert raw.tobytes() == sample.tobytes()


def test_read_only_faces_cannot_be_made_writable():
    t = Tensor.from_numpy(grid())
    for arr in (t.to_numpy(), t.__array__(), np.asarray(t)):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0, 0] = 1
        with pytest.raises(ValueError):
            arr.flags.writeable = True
    with pytest.raises(TypeError):
        t.buffer()[0] = 1
    with pytest.raises(TypeError):
        memoryview(t)[0, 0] = 1
    np.testing.assert_array_equal(t.to_numpy(), grid())


@needs_numpy_negotiation
def test_faces_alias_one_buffer():
    t = Tensor.from_numpy(grid())
    address = t.to_numpy().ctypes.data
    assert t.to_numpy().ctypes.data == address
    assert t.__array__().ctypes.data == address
    assert t.__array__(copy=False).ctypes.data == address
    assert np.asarray(t).ctypes.data == address
    assert np.asarray(t, copy=False).ctypes.data == address
    assert np.asarray(memoryview(t)).ctypes.data == address
    assert np.frombuffer(t.buffer(), dtype=np.uint8).ctypes.data == address
    assert np.from_dlpack(t).ctypes.data == address


@pytest.mark.parametrize(
    "make_copy",
    [lambda t: t.__array__(copy=True), np.array, lambda t: np.asarray(t, copy=True)],
    ids=["__array__copy", "np.array", "asarray_copy"],
)
@needs_numpy_negotiation
def test_array_copy_true_is_a_writable_copy(make_copy):
    t = Tensor.from_numpy(grid())
    out = make_copy(t)
    assert out.flags.writeable and out.ctypes.data != t.to_numpy().ctypes.data
    out[...] = 9
    np.testing.assert_array_equal(t.to_numpy(), grid())


@needs_numpy_negotiation
def test_array_dtype_conversion():
    t = Tensor.from_numpy(grid("int32"))
    converted = t.__array__(np.float64)
    assert converted.dtype == np.float64
    np.testing.assert_array_equal(converted, grid("int32"))
    with pytest.raises(ValueError):
        t.__array__(np.float64, copy=False)
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float64, copy=False)
    same = t.__array__(np.dtype("int32"), copy=False)  # no conversion needed: still zero-copy
    assert same.ctypes.data == t.to_numpy().ctypes.data and not same.flags.writeable


@pytest.mark.parametrize("flags", [PyBUF_WRITABLE, PyBUF_FULL], ids=["WRITABLE", "FULL"])
def test_writable_buffer_request_is_refused(flags):
    t = Tensor.from_numpy(grid())
    request_buffer(t, PyBUF_FULL_RO)  # the read-only request works through the same helper
    with pytest.raises(BufferError):
        request_buffer(t, flags)
    t.into_dlpack()  # neither request left a buffer clone behind


def test_edge_shapes_through_read_only_faces(edge_array):
    t = Tensor.from_numpy(edge_array)
    assert t.shape == edge_array.shape and t.ndim == edge_array.ndim
    assert t.nbytes == edge_array.nbytes
    assert t.dtype == np.float32
    for face in (t.to_numpy(), t.__array__(), t.__array__(copy=True), np.asarray(t)):
        assert face.shape == edge_array.shape
        np.testing.assert_array_equal(face, edge_array)
    with memoryview(t) as view:
        assert view.shape == edge_array.shape and view.readonly
        np.testing.assert_array_equal(np.asarray(view), edge_array)
    assert bytes(t.buffer()) == edge_array.tobytes()


# --- into_dlpack(): the move -------------------------------------------------------------------

SHARED_VIEWS = {
    "buffer": lambda t: t.buffer(),
    "memoryview": memoryview,
    "memoryview_slice": lambda t: memoryview(t)[1:],
    "to_numpy": lambda t: t.to_numpy(),
    "to_numpy_slice": lambda t: t.to_numpy()[1:, ::2],
    "asarray": np.asarray,
    "__array__": lambda t: t.__array__(),
    "from_dlpack": pytest.param(np.from_dlpack, marks=needs_numpy_negotiation),
    "capsule": lambda t: t.__dlpack__(max_version=(1, 0)),
    "capsule_copy_false": lambda t: t.__dlpack__(max_version=(1, 0), copy=False),
}


@pytest.mark.parametrize("make_view", SHARED_VIEWS.values(), ids=SHARED_VIEWS.keys())
def test_into_dlpack_refused_while_a_view_lives(make_view):
    t = Tensor.from_numpy(grid())
    view = make_view(t)
    with pytest.raises(BufferError, match=re.escape(SHARED_MESSAGE)):
        t.into_dlpack()
    # the refusal leaves the tensor whole
    assert t.shape == (5, 7)
    np.testing.assert_array_equal(t.to_numpy(), grid())
    np.testing.assert_array_equal(np.from_dlpack(t), grid())
    del view
    gc.collect()
    owned = t.into_dlpack()
    assert isinstance(owned, zarrpipe.OwnedTensor)


def test_every_view_must_be_dropped_before_the_move():
    t = Tensor.from_numpy(grid())
    views = [memoryview(t), t.to_numpy(), np.from_dlpack(t)]
    while views:
        with pytest.raises(BufferError, match="buffer is shared"):
            t.into_dlpack()
        views.pop()
        gc.collect()
    t.into_dlpack()


COPIES = {
    "__array__copy": lambda t: t.__array__(copy=True),
    "np.array": np.array,
    "from_dlpack_copy": pytest.param(
        lambda t: np.from_dlpack(t, copy=True), marks=needs_numpy_negotiation
    ),
    "capsule_copy": lambda t: t.__dlpack__(max_version=(1, 0), copy=True),
    "legacy_capsule": lambda t: t.__dlpack__(),
    "bytes": lambda t: bytes(t.buffer()),
}


@pytest.mark.parametrize("make_copy", COPIES.values(), ids=COPIES.keys())
def test_copies_do_not_hold_the_buffer(make_copy):
    t = Tensor.from_numpy(grid())
    copy = make_copy(t)
    moved = np.from_dlpack(t.into_dlpack())
    moved[...] = 0
    if isinstance(copy, np.ndarray):
        copy = copy.tobytes()
    elif not isinstance(copy, bytes):
        copy = capsule_bytes(copy)
    assert copy == grid().tobytes()


def test_fresh_tensor_moves_out():
    t = Tensor.from_numpy(grid())
    owned = t.into_dlpack()
    assert isinstance(owned, zarrpipe.OwnedTensor)
    assert owned.shape == (5, 7) and owned.dtype == np.uint16


@needs_numpy_read_only_flag
def test_zero_size_tensors_move_out(edge_array):
    t = Tensor.from_numpy(edge_array)
    out = np.from_dlpack(t.into_dlpack())
    assert out.shape == edge_array.shape and out.dtype == np.float32
    assert out.flags.writeable
    np.testing.assert_array_equal(out, edge_array)


# --- the tombstone -----------------------------------------------------------------------------

DATA_FACES = {
    "buffer": lambda t: t.buffer(),
    "memoryview": memoryview,
    "to_numpy": lambda t: t.to_numpy(),
    "asarray": np.asarray,
    "__array__": lambda t: t.__array__(),
    "__array__copy": lambda t: t.__array__(copy=True),
    "dlpack_versioned": lambda t: t.__dlpack__(max_version=(1, 0)),
    "dlpack_versioned_copy": lambda t: t.__dlpack__(max_version=(1, 0), copy=True),
    "dlpack_legacy": lambda t: t.__dlpack__(),
    "from_dlpack": np.from_dlpack,
    "into_dlpack": lambda t: t.into_dlpack(),
}


@pytest.mark.parametrize("face", DATA_FACES.values(), ids=DATA_FACES.keys())
def test_tombstone_refuses_data_faces(face):
    t = Tensor.from_numpy(grid())
    t.into_dlpack()
    with pytest.raises(BufferError, match="already consumed"):
        face(t)


def test_tombstone_keeps_metadata():
    t = Tensor.from_numpy(grid("float32"))
    before = (t.shape, t.dtype, t.nbytes, t.ndim)
    owned = t.into_dlpack()
    del owned
    gc.collect()
    assert (t.shape, t.dtype, t.nbytes, t.ndim) == before
    assert_repr_names_shape_and_dtype(t)  # it may also say "consumed"
