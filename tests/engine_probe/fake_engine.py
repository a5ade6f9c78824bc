"""A stand-in for PyTorch and an engine's sparse decode op, for the probe's tests without a GPU.

The probe loads this file when MLAPLAN_ENGINE_PROBE_FAKE names it (tools/engine_probe/
mla_plan_engine_probe.py, run_fake) and sets HostTensor, BUNDLE (the bundle directory) and MANIFEST
on it first. MLAPLAN_FAKE_ENGINE_MODE picks what it does:

  ok        returns mla-plan's own output of the bundle (out.mla-plan.bin, lse.mla-plan.bin; lse
            as FlashMLA returns it, [b, h_q, s_q]) and the plan the manifest predicts
  corrupt   as ok, with one output element set to 1.0
  badmeta   as ok, with one field of the first scheduler record off by one
  nometa    as ok, without scheduler metadata (an op that returns two values)
  notorch   no PyTorch
  noengine  PyTorch, but no op library
  oldgpu    a GPU of compute capability 8.0
  schema    an op whose schema takes a required argument the bundle has no value for
  raise     an op that raises the engine's argument check
  crash     the process dies before any result is written
  hang      the process sleeps (mla-plan's timeout ends it)
"""

import os
import struct
import sys
import time

MODE = os.environ.get("MLAPLAN_FAKE_ENGINE_MODE", "ok")
HostTensor = globals().get("HostTensor")
BUNDLE = globals().get("BUNDLE", "")
MANIFEST = globals().get("MANIFEST", {})

TORCH = MODE != "notorch"
OPS = MODE != "noengine"
CAPABILITY = (8, 0) if MODE == "oldgpu" else (9, 0)
DEVICE_NAME = "Fake H200"
VERSION = "0.0-fake"
TIMING = {"method": "fake", "median_us": 12.5, "min_us": 12.0, "p90_us": 13.0, "replays": 3, "warmup": 1,
          "flush_bytes": 0, "eager_median_us": 11.0, "eager_iterations": 3}

OP_SCHEMA = ("_flashmla_C::sparse_decode_fwd(Tensor q, Tensor kv, Tensor indices, Tensor? topk_length, "
             "Tensor? attn_sink, Tensor? tile_scheduler_metadata, Tensor? num_splits, Tensor? extra_kv, "
             "Tensor? extra_indices, Tensor? extra_topk_length, int d_v, float sm_scale, Tensor(a!)? out=None) "
             "-> (Tensor, Tensor, Tensor, Tensor)")
if MODE == "schema":
    OP_SCHEMA = OP_SCHEMA.replace("int d_v,", "int d_v, int page_table_version,")
if MODE == "nometa":
    OP_SCHEMA = OP_SCHEMA.replace("-> (Tensor, Tensor, Tensor, Tensor)", "-> (Tensor, Tensor)")

if MODE == "crash":
    sys.stderr.write("fake engine: Segmentation fault (simulated)\n")
    sys.stderr.flush()
    os._exit(139)
if MODE == "hang":
    time.sleep(3600)


def _read(name):
    with open(os.path.join(BUNDLE, name), "rb") as f:
        return f.read()


def _int32s(values):
    return struct.pack("<%di" % len(values), *values)


def sparse_decode_fwd(q, kv, indices, topk_length, attn_sink, tile_scheduler_metadata, num_splits, extra_kv,
                      extra_indices, extra_topk_length, d_v, sm_scale, out=None):
    m = MANIFEST
    b, s_q, h_q = m["b"], m["s_q"], m["h_q"]
    # The adapted call passed the bundle's tensors in the schema's order.
    assert q.shape == [b, s_q, h_q, m["d_qk"]] and q.dtype == "bfloat16", q.shape
    assert kv.dtype == "uint8" and indices.dtype == "int32" and topk_length.shape == [b]
    assert (extra_kv is None) == (not m.get("extra"))
    assert d_v == 512 and abs(sm_scale - m["softmax_scale"]) < 1e-6
    assert tile_scheduler_metadata is None and num_splits is None
    if MODE == "raise":
        raise RuntimeError("Expected h_q == 64 || h_q == 128 (fake engine check)")
    o = bytearray(_read(m["files"]["own_out"]["file"]))
    if MODE == "corrupt":
        o[34:36] = struct.pack("<H", 0x3F80)  # element 17: bf16 1.0
    lse = HostTensor(_read(m["files"]["own_lse"]["file"]), "float32", [b, s_q, h_q]).transpose(1, 2)
    outs = [HostTensor(o, "bfloat16", [b, s_q, h_q, d_v]), lse]
    if MODE == "nometa":
        return tuple(outs)
    p = m["predicted"]
    records = [x for rec in p["tile_scheduler_metadata"] for x in rec]
    if MODE == "badmeta":
        records[3] += 1
    outs.append(HostTensor(_int32s(records), "int32", [len(p["tile_scheduler_metadata"]), 8]))
    outs.append(HostTensor(_int32s(p["num_splits"]), "int32", [len(p["num_splits"])]))
    return tuple(outs)
