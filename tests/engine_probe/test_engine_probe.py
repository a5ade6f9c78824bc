#!/usr/bin/env python3
"""Unit tests of mla-plan's engine probe without a GPU, PyTorch or NumPy (ctest: engine_probe.unit).

A tiny case bundle is written here in pure Python (the format of docs/verify.md, "The case
bundle"); the probe runs on it with fake_engine.py standing in for PyTorch and the engine's op
(MLAPLAN_ENGINE_PROBE_FAKE), in each of its modes, and without the fake (the real route, which
must say no_torch on a machine without PyTorch); and the PyTorch route itself with fake_torch/
standing in for PyTorch beside a fake vllm package (torch.ops._flashmla_C) and a fake flash_mla.

    python3 tests/engine_probe/test_engine_probe.py [-v]
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROBE_DIR = os.path.join(ROOT, "tools", "engine_probe")
sys.path.insert(0, PROBE_DIR)
import mla_plan_engine_probe as probe  # noqa: E402

FAKE = os.path.join(HERE, "fake_engine.py")

B, S_Q, H_Q, D_QK, D_V = 2, 1, 4, 8, 512
PAGE, STRIDE, PAGES, ROW = 4, 40, 3, 8
TOPK = 4


def write_bundle(d, extra=False, bad_index=False):
    """A bundle of b 2, h_q 4 (shapes small; the fake op does not compute attention)."""
    files = {}

    def put(name, fname, dtype, shape, data):
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)
        files[name] = {"file": fname, "offset": 0, "bytes": len(data), "dtype": dtype, "shape": shape}

    put("q", "q.bin", "bfloat16", [B, S_Q, H_Q, D_QK], struct.pack("<%dH" % (B * H_Q * D_QK), *([0x3F80] * (B * H_Q * D_QK))))
    put("kv", "kv.bin", "uint8", [PAGES, STRIDE], bytes(range(PAGES * STRIDE)))
    idx = [0, 5, -1, 11, 3, 2, 1, 99 if bad_index else 7]
    put("indices", "indices.bin", "int32", [B, S_Q, TOPK], struct.pack("<8i", *idx))
    put("topk_length", "topk_length.bin", "int32", [B], struct.pack("<2i", 4, 3))
    put("attn_sink", "attn_sink.bin", "float32", [H_Q], struct.pack("<4f", 0.5, 1, 2, 3))
    if extra:
        put("extra_kv", "extra_kv.bin", "uint8", [PAGES, STRIDE], bytes(PAGES * STRIDE))
        put("extra_indices", "extra_indices.bin", "int32", [B, S_Q, TOPK], struct.pack("<8i", *([0] * 8)))
        put("extra_topk_length", "extra_topk_length.bin", "int32", [B], struct.pack("<2i", 1, 1))
    n = B * S_Q * H_Q
    put("own_out", "out.mla-plan.bin", "bfloat16", [B, S_Q, H_Q, D_V], struct.pack("<%dH" % (n * D_V), *range(n * D_V)))
    put("own_lse", "lse.mla-plan.bin", "float32", [B, S_Q, H_Q], struct.pack("<%df" % n, *[float(i) for i in range(n)]))
    cache = {"format": "fp8_ds_mla_v4", "row_bytes": ROW, "page_block_size": PAGE, "page_stride_bytes": STRIDE,
             "num_pages": PAGES, "topk": TOPK}
    m = {"schema": probe.BUNDLE_SCHEMA, "op": "sparse_decode", "device_index": 0, "b": B, "s_q": S_Q, "h_q": H_Q,
         "d_qk": D_QK, "d_v": D_V, "softmax_scale": 0.125, "main": cache, "extra": dict(cache) if extra else None,
         "files": files,
         "predicted": {"num_sm_parts": 2, "tile_scheduler_metadata": [[0, 0, 1, 0, 0, 0, 0, 0], [1, 0, 1, 2, 0, 0, 0, 0]],
                       "num_splits": [0, 1, 2]},
         "timing": {"replays": 3, "warmup": 1, "flush_bytes": 1024, "eager_iterations": 3}}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(m, f)
    return m


class Args:
    def __init__(self, bundle, route=None, engine_path=None):
        self.bundle = bundle
        self.route = route
        self.engine_path = engine_path or []


class ProbeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mlaplan-probe-")
        self.saved = {k: os.environ.get(k) for k in ("MLAPLAN_ENGINE_PROBE_FAKE", "MLAPLAN_FAKE_ENGINE_MODE")}

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def run_fake(self, mode, **bundle):
        m = write_bundle(self.dir, **bundle)
        os.environ["MLAPLAN_ENGINE_PROBE_FAKE"] = FAKE
        os.environ["MLAPLAN_FAKE_ENGINE_MODE"] = mode
        self.assertEqual(probe.main(["--bundle", self.dir]), 0)
        with open(os.path.join(self.dir, "result.json")) as f:
            return m, json.load(f)

    def read(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read()

    def test_ok_writes_the_outputs_as_mla_plan_reads_them(self):
        m, r = self.run_fake("ok")
        self.assertEqual(r["status"], "ok", r["message"])
        self.assertEqual(r["schema"], probe.RESULT_SCHEMA)
        self.assertEqual(r["engine"]["op"], "fake.sparse_decode_fwd")
        self.assertIn("sparse_decode_fwd(Tensor q", r["engine"]["schema"])
        self.assertEqual(self.read("out.bin"), self.read("out.mla-plan.bin"))
        # lse came back as [b, h_q, s_q] and is written as [b, s_q, h_q]
        self.assertEqual(r["lse_returned_as"], "b,h_q,s_q")
        self.assertEqual(self.read("lse.bin"), self.read("lse.mla-plan.bin"))
        self.assertEqual(r["outputs"]["tile_scheduler_metadata"]["shape"], [2, 8])
        recs = struct.unpack("<16i", self.read("tile_scheduler_metadata.bin"))
        self.assertEqual(list(recs), [x for rec in m["predicted"]["tile_scheduler_metadata"] for x in rec])
        self.assertEqual(list(struct.unpack("<3i", self.read("num_splits.bin"))), [0, 1, 2])
        self.assertEqual(r["timing"]["median_us"], 12.5)
        self.assertEqual(r["device"]["capability"], "9.0")

    def test_extra_cache_is_passed(self):
        _, r = self.run_fake("ok", extra=True)
        self.assertEqual(r["status"], "ok", r["message"])

    def test_corrupt_output_is_written_as_returned(self):
        _, r = self.run_fake("corrupt")
        self.assertEqual(r["status"], "ok")
        self.assertNotEqual(self.read("out.bin"), self.read("out.mla-plan.bin"))
        self.assertEqual(struct.unpack_from("<H", self.read("out.bin"), 34)[0], 0x3F80)

    def test_no_metadata_returned(self):
        _, r = self.run_fake("nometa")
        self.assertEqual(r["status"], "ok", r["message"])
        self.assertNotIn("tile_scheduler_metadata", r["outputs"])

    def test_absent_cases_are_their_own_status(self):
        for mode, status, words in [("notorch", "no_torch", "PyTorch is not importable"),
                                    ("noengine", "no_engine", "no engine op library"),
                                    ("oldgpu", "unsupported_gpu", "compute capability 8.0"),
                                    ("schema", "schema_mismatch", "'page_table_version'"),
                                    ("raise", "error", "Expected h_q == 64")]:
            with self.subTest(mode=mode):
                _, r = self.run_fake(mode)
                self.assertEqual(r["status"], status, r["message"])
                self.assertIn(words, r["message"])
                self.assertTrue(r["looked_for"], r)
                self.assertTrue(r["where"], r)
                self.assertFalse(os.path.exists(os.path.join(self.dir, "out.bin")))

    def test_bad_bundle(self):
        _, r = self.run_fake("ok", bad_index=True)
        self.assertEqual(r["status"], "bad_bundle")
        self.assertIn("indices holds 99, outside -1..11", r["message"])
        os.remove(os.path.join(self.dir, "kv.bin"))
        self.assertEqual(probe.main(["--bundle", self.dir]), 0)
        with open(os.path.join(self.dir, "result.json")) as f:
            self.assertEqual(json.load(f)["status"], "bad_bundle")

    def test_real_route_without_torch_says_so(self):
        try:
            import torch  # noqa: F401
            self.skipTest("PyTorch is installed here")
        except ImportError:
            pass
        write_bundle(self.dir)
        os.environ.pop("MLAPLAN_ENGINE_PROBE_FAKE", None)
        r = probe.probe(Args(self.dir))
        self.assertEqual(r["status"], "no_torch")
        self.assertIn("torch (PyTorch with CUDA)", r["looked_for"])
        self.assertTrue(any(w.startswith("sys.path: ") for w in r["where"]))

    def test_crash_leaves_no_result(self):
        write_bundle(self.dir)
        env = dict(os.environ, MLAPLAN_ENGINE_PROBE_FAKE=FAKE, MLAPLAN_FAKE_ENGINE_MODE="crash")
        p = subprocess.run([sys.executable, os.path.join(PROBE_DIR, "mla_plan_engine_probe.py"), "--bundle", self.dir],
                           env=env, capture_output=True, text=True, check=False)
        self.assertEqual(p.returncode, 139)
        self.assertIn("Segmentation fault", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "result.json")))


FAKE_FLASH_MLA = """
import torch


class FlashMLASchedMeta:
    tile_scheduler_metadata = None
    num_splits = None


def get_mla_metadata(*args, **kwargs):
    return FlashMLASchedMeta(), None


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits=None,
                           softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None, attn_sink=None,
                           extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None, extra_topk_length=None):
    assert block_table is None and cache_seqlens is None and num_splits is None and is_fp8_kvcache and not causal
    s = tile_scheduler_metadata
    o, lse, s.tile_scheduler_metadata, s.num_splits = torch._sparse_decode_fwd(
        q, k_cache, indices, topk_length, attn_sink, s.tile_scheduler_metadata, s.num_splits, extra_k_cache,
        extra_indices_in_kvcache, extra_topk_length, head_dim_v, softmax_scale)
    return o, lse
"""


class TorchRouteTest(unittest.TestCase):
    """The PyTorch route with fake_torch/ for PyTorch and a fake vllm / flash_mla package (in a
    subprocess: the fake torch must not stay imported here)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mlaplan-probe-torch-")
        self.bundle = os.path.join(self.dir, "bundle")
        os.mkdir(self.bundle)
        write_bundle(self.bundle, extra=True)
        pkgs = os.path.join(self.dir, "site")
        os.makedirs(os.path.join(pkgs, "vllm"))
        os.makedirs(os.path.join(pkgs, "flash_mla"))
        open(os.path.join(pkgs, "vllm", "__init__.py"), "w").close()
        open(os.path.join(pkgs, "vllm", "_flashmla_C.abi3.so"), "w").close()
        with open(os.path.join(pkgs, "flash_mla", "__init__.py"), "w") as f:
            f.write(FAKE_FLASH_MLA)
        self.paths = ["--engine-path", os.path.join(HERE, "fake_torch"), "--engine-path", pkgs]

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_probe(self, *extra):
        env = {k: v for k, v in os.environ.items() if k not in ("MLAPLAN_ENGINE_PROBE_FAKE", "PYTHONPATH")}
        p = subprocess.run([sys.executable, os.path.join(PROBE_DIR, "mla_plan_engine_probe.py"), "--bundle",
                            self.bundle] + self.paths + list(extra), env=env, capture_output=True, text=True,
                           check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.bundle, "result.json")) as f:
            return json.load(f)

    def check_outputs(self, r):
        self.assertEqual(r["status"], "ok", r)
        self.assertEqual(r["device"]["capability"], "9.0")
        self.assertEqual(r["lse_returned_as"], "b,h_q,s_q")
        self.assertEqual(os.path.getsize(os.path.join(self.bundle, "out.bin")), B * S_Q * H_Q * D_V * 2)
        self.assertEqual(os.path.getsize(os.path.join(self.bundle, "lse.bin")), B * S_Q * H_Q * 4)
        self.assertEqual(r["outputs"]["tile_scheduler_metadata"]["shape"], [132, 8])
        self.assertEqual(r["outputs"]["num_splits"]["shape"], [B + 1])
        t = r["timing"]
        self.assertEqual(t["method"], "cuda_graph_cold_l2")
        self.assertAlmostEqual(t["median_us"], 10.0)
        self.assertAlmostEqual(t["eager_median_us"], 10.0)
        self.assertEqual(t["replays"], 3)
        self.assertEqual(r["versions"]["torch"], "0.0-fake")

    def test_vllm_ops(self):
        r = self.run_probe()
        self.check_outputs(r)
        self.assertEqual(r["engine"]["route"], "vllm")
        self.assertEqual(r["engine"]["op"], "torch.ops._flashmla_C.sparse_decode_fwd")
        self.assertTrue(r["engine"]["file"].endswith("_flashmla_C.abi3.so"))
        self.assertIn("Tensor? extra_kv", r["engine"]["schema"])

    def test_flash_mla_package(self):
        r = self.run_probe("--route", "flash_mla")
        self.check_outputs(r)
        self.assertEqual(r["engine"]["route"], "flash_mla")
        self.assertIn("extra_indices_in_kvcache", r["engine"]["schema"])


class SchemaTest(unittest.TestCase):
    VLLM = ("_flashmla_C::sparse_decode_fwd(Tensor q, Tensor kv, Tensor indices, Tensor? topk_length, "
            "Tensor? attn_sink, Tensor? tile_scheduler_metadata, Tensor? num_splits, Tensor? extra_kv, "
            "Tensor? extra_indices, Tensor? extra_topk_length, int d_v, float sm_scale, Tensor(a!)? out=None) "
            "-> (Tensor, Tensor, Tensor, Tensor)")

    def test_parse(self):
        params, n = probe.parse_op_schema(self.VLLM)
        self.assertEqual(n, 4)
        self.assertEqual([p.name for p in params][:3], ["q", "kv", "indices"])
        self.assertEqual([p.name for p in params if p.required], ["q", "kv", "indices", "d_v", "sm_scale"])

    def test_call_in_schema_order(self):
        params, _ = probe.parse_op_schema(self.VLLM)
        v = {"q": "Q", "kv": "KV", "indices": "I", "topk_length": "L", "attn_sink": None, "d_v": 512,
             "sm_scale": 0.5, "extra_kv": None, "extra_indices": None, "extra_topk_length": None}
        self.assertEqual(probe.build_call(params, v, "op"),
                         ["Q", "KV", "I", "L", None, None, None, None, None, None, 512, 0.5, None])

    def test_a_needed_input_the_op_lacks(self):
        params, _ = probe.parse_op_schema(self.VLLM.replace("Tensor? extra_kv, ", ""))
        v = {"q": "Q", "kv": "KV", "indices": "I", "d_v": 512, "sm_scale": 0.5, "extra_kv": "E"}
        with self.assertRaises(probe.Stop) as c:
            probe.build_call(params, v, "op")
        self.assertEqual(c.exception.status, "schema_mismatch")
        self.assertIn("extra_kv", c.exception.message)

    def test_flash_mla_signature(self):
        def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                                   num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False,
                                   indices=None, attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None,
                                   topk_length=None, extra_topk_length=None):
            return None

        params = probe.signature_params(flash_mla_with_kvcache)
        v = {"q": "Q", "kv": "KV", "indices": "I", "topk_length": "L", "attn_sink": "S", "d_v": 512, "sm_scale": 0.5,
             "extra_kv": "E", "extra_indices": "EI", "extra_topk_length": "EL", "tile_scheduler_metadata": "M",
             "num_splits": None, "block_table": None, "cache_seqlens": None, "causal": False, "is_fp8_kvcache": True}
        self.assertEqual(probe.build_call(params, v, "fn"),
                         ["Q", "KV", None, None, 512, "M", None, 0.5, False, True, "I", "S", "E", "EI", "L", "EL"])


if __name__ == "__main__":
    unittest.main()
