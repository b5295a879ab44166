"""DLPack: numpy.from_dlpack shares the result's memory (checked by pointer),
the capsule keeps the result alive, and the protocol's arguments behave."""

import ctypes
import gc

import numpy as np
import pytest

import encgraph
from pyhelpers import QUIET, TOY, image

capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.restype = ctypes.c_int
capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


@pytest.fixture(scope="module")
def rt():
    runtime = encgraph.Runtime(TOY, **QUIET)
    runtime.capture()
    return runtime


def pointer(array):
    return array.__array_interface__["data"][0]


def test_numpy_from_dlpack_shares_memory(rt):
    results = rt.encode(images=[image(56, 56, 1), image(28, 84, 2)])
    for r in results:
        assert r.__dlpack_device__() == (1, 0)  # kDLCPU
        array = np.from_dlpack(r)
        assert pointer(array) == r.data_ptr == r.primary.data_ptr
        assert array.shape == r.shape and array.dtype == np.float32
        np.testing.assert_array_equal(array, r.numpy())
        for name in r:  # every named output
            view = np.from_dlpack(r[name])
            assert pointer(view) == r[name].data_ptr
            assert view.shape == r[name].shape
    # Items of one call are rows of one allocation: the second item's view
    # starts where the result says.
    assert results[0].data_ptr != results[1].data_ptr


def test_capsule_keeps_the_result_alive(rt):
    [r] = rt.encode(images=[image(56, 56, 3)])
    expected = r.numpy().copy()
    array = np.from_dlpack(r)
    address = pointer(array)
    del r
    gc.collect()
    # More calls: had the memory been freed, it would be reused and overwritten.
    for k in range(20):
        rt.encode(images=[image(56, 56, 100 + k)])
    assert pointer(array) == address
    np.testing.assert_array_equal(array, expected)


def test_capsule_outlives_the_runtime():
    runtime = encgraph.Runtime(TOY, **QUIET)
    [r] = runtime.encode(images=[image(28, 28, 4)])
    expected = r.numpy().copy()
    array = np.from_dlpack(r)
    runtime.close()
    del runtime, r
    gc.collect()
    np.testing.assert_array_equal(array, expected)


def test_capsules_legacy_and_versioned(rt):
    [r] = rt.encode(images=[image(28, 28, 5)])
    legacy = r.__dlpack__()
    assert capsule_is_valid(legacy, b"dltensor") == 1
    versioned = r.__dlpack__(max_version=(1, 0))
    assert capsule_is_valid(versioned, b"dltensor_versioned") == 1
    old = r.__dlpack__(max_version=(0, 8))
    assert capsule_is_valid(old, b"dltensor") == 1
    del legacy, versioned, old  # never consumed: freed by the capsules themselves
    gc.collect()
    assert r.__dlpack__(stream=None, dl_device=(1, 0), copy=False) is not None


def test_protocol_refusals(rt):
    [r] = rt.encode(images=[image(28, 28, 6)])
    with pytest.raises(BufferError, match="without copying"):
        r.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="lives on cpu"):
        r.__dlpack__(dl_device=(2, 0))


def test_out_numpy_is_a_copy(rt):
    [r] = rt.encode(images=[image(56, 28, 7)])
    [c] = rt.encode(images=[image(56, 28, 7)], out="numpy")
    first = list(r)[0]
    assert pointer(c[first]) != r.data_ptr
    c[first][:] = 0  # writable and independent
    assert np.abs(np.from_dlpack(r)).sum() > 0
