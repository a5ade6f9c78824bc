"""A stand-in for PyTorch, just large enough to drive the probe's PyTorch route without a GPU.

tests/engine_probe/test_engine_probe.py puts this directory first on the probe's sys.path
(--engine-path) beside a fake `vllm` package whose _flashmla_C library torch.ops.load_library
"loads": the op it registers returns zero outputs of the shapes FlashMLA returns and a plan. The
tensors are bytes with a dtype, a shape and strides in elements; CUDA calls do nothing and every
timed interval is 10 us. It checks the plumbing (finding the op, reading its schema, the call, the
lse transpose, the bytes written back, the timing loop), not any numbers.
"""

import ctypes
import types

__version__ = "0.0-fake"
version = types.SimpleNamespace(cuda="12.8")


class dtype:
    def __init__(self, name, itemsize):
        self.name = name
        self.itemsize = itemsize

    def __repr__(self):
        return "torch." + self.name


uint8 = dtype("uint8", 1)
bfloat16 = dtype("bfloat16", 2)
float32 = dtype("float32", 4)
int32 = dtype("int32", 4)
float8_e4m3fn = dtype("float8_e4m3fn", 1)


def _contiguous_strides(shape):
    strides, acc = [], 1
    for x in reversed(shape):
        strides.insert(0, acc)
        acc *= x
    return strides


class Tensor:
    def __init__(self, buf, dt, shape, strides=None, offset=0):
        self.buf = buf  # bytearray
        self.dtype = dt
        self.shape = tuple(int(x) for x in shape)
        self.strides = list(strides) if strides is not None else _contiguous_strides(self.shape)
        self.offset = offset  # elements

    def numel(self):
        n = 1
        for x in self.shape:
            n *= x
        return n

    def element_size(self):
        return self.dtype.itemsize

    def is_contiguous(self):
        return self.strides == _contiguous_strides(self.shape)

    def view(self, arg):
        if isinstance(arg, dtype):
            if arg.itemsize == self.dtype.itemsize:
                return Tensor(self.buf, arg, self.shape, self.strides, self.offset)
            assert self.is_contiguous(), "view(dtype) of another size needs a contiguous tensor"
            last = self.shape[-1] * self.dtype.itemsize // arg.itemsize
            return Tensor(self.buf, arg, self.shape[:-1] + (last,), None, self.offset * self.dtype.itemsize // arg.itemsize)
        return self.reshape(arg)

    def reshape(self, shape):
        assert self.is_contiguous()
        shape = tuple(shape)
        n = 1
        for x in shape:
            n *= x
        assert n == self.numel(), (shape, self.shape)
        return Tensor(self.buf, self.dtype, shape, None, self.offset)

    def to(self, device):
        return self

    def cpu(self):
        return self

    def detach(self):
        return self

    def as_strided(self, size, stride):
        return Tensor(self.buf, self.dtype, size, stride, self.offset)

    def transpose(self, a, b):
        shape, strides = list(self.shape), list(self.strides)
        shape[a], shape[b] = shape[b], shape[a]
        strides[a], strides[b] = strides[b], strides[a]
        return Tensor(self.buf, self.dtype, shape, strides, self.offset)

    def contiguous(self):
        if self.is_contiguous():
            return self
        size = self.dtype.itemsize
        out = bytearray(self.numel() * size)
        idx = [0] * len(self.shape)
        for k in range(self.numel()):
            src = (self.offset + sum(i * s for i, s in zip(idx, self.strides))) * size
            out[k * size:(k + 1) * size] = self.buf[src:src + size]
            for d in reversed(range(len(idx))):
                idx[d] += 1
                if idx[d] < self.shape[d]:
                    break
                idx[d] = 0
        return Tensor(out, self.dtype, self.shape)

    def data_ptr(self):
        arr = (ctypes.c_char * len(self.buf)).from_buffer(self.buf)
        self._keep = arr
        return ctypes.addressof(arr) + self.offset * self.dtype.itemsize

    def fill_(self, value):
        return self


def frombuffer(buf, dtype):
    return Tensor(buf, dtype, (len(buf) // dtype.itemsize,))


def empty(*shape, dtype=float32, device=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    n = 1
    for x in shape:
        n *= x
    return Tensor(bytearray(n * dtype.itemsize), dtype, shape)


def zeros(*shape, dtype=float32, device=None):
    return empty(*shape, dtype=dtype, device=device)


class _Props:
    major, minor, name, multi_processor_count = 9, 0, "Fake H200 (fake torch)", 132


class _Event:
    def __init__(self, enable_timing=False):
        pass

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.010  # ms


class _Graph:
    def replay(self):
        pass


class _GraphContext:
    def __init__(self, g, capture_error_mode=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


cuda = types.SimpleNamespace(
    is_available=lambda: True, device_count=lambda: 1, set_device=lambda i: None,
    get_device_properties=lambda i: _Props(), synchronize=lambda: None, Event=_Event, CUDAGraph=_Graph,
    graph=_GraphContext)

# ---- torch.ops and the fake _flashmla_C library

SCHEMA = ("_flashmla_C::sparse_decode_fwd(Tensor q, Tensor kv, Tensor indices, Tensor? topk_length, Tensor? attn_sink, "
          "Tensor? tile_scheduler_metadata, Tensor? num_splits, Tensor? extra_kv, Tensor? extra_indices, "
          "Tensor? extra_topk_length, int d_v, float sm_scale, Tensor(a!)? out=None) -> (Tensor, Tensor, Tensor, Tensor)")

calls = []


def _sparse_decode_fwd(q, kv, indices, topk_length, attn_sink, tile_scheduler_metadata, num_splits, extra_kv,
                       extra_indices, extra_topk_length, d_v, sm_scale, out=None):
    calls.append(tile_scheduler_metadata is not None)
    assert kv.dtype is float8_e4m3fn and len(kv.shape) == 4 and kv.shape[2] == 1, (kv.dtype, kv.shape)
    assert q.dtype is bfloat16 and indices.dtype is int32
    b, s_q, h_q = q.shape[:3]
    o = empty(b, s_q, h_q, d_v, dtype=bfloat16)
    lse = empty(b, s_q, h_q, dtype=float32).transpose(1, 2)  # FlashMLA's [b, h_q, s_q] view
    if tile_scheduler_metadata is None:
        tile_scheduler_metadata = empty(132, 8, dtype=int32)
        num_splits = empty(b + 1, dtype=int32)
    return o, lse, tile_scheduler_metadata, num_splits


class _Overload:
    _schema = SCHEMA


class _Op:
    default = _Overload()

    def __call__(self, *args):
        return _sparse_decode_fwd(*args)


class _Ops:
    def load_library(self, path):
        self._flashmla_C = types.SimpleNamespace(sparse_decode_fwd=_Op())


ops = _Ops()
