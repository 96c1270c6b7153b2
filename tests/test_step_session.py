"""Decoding steps run on a one-thread session of the decoder's graph beside the prompt pass's (engine/model/
runtime.py): the same hidden states and KV, on the real model."""

from __future__ import annotations

import numpy as np
import pytest

from engine.model.manifest import load_manifest
from engine.model.runtime import OnnxDecoder

pytestmark = pytest.mark.model


def _head_threads(dec: OnnxDecoder) -> int:
    return dec.heads["full"].session.get_session_options().intra_op_num_threads


def test_a_step_on_the_one_thread_session_writes_what_the_prompt_session_would(model_dir):
    man = load_manifest(model_dir)
    dec = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1)
    assert dec.step_session is not None  # two threads: steps have their own session
    prompt = np.array([[100 + (i * 37) % 20000 for i in range(48)]], dtype=np.int64)
    dec.forward(prompt, 0)
    step = np.array([[1234, 56, 789]], dtype=np.int64)  # the pending token and two drafted ones
    one = dec.forward(step, 48, step=True).copy()
    kv_one = dec.kv.keys[0][0, :, 48:51].copy()
    two = dec.forward(step, 48).copy()  # the same positions again, on the prompt pass's session
    kv_two = dec.kv.keys[0][0, :, 48:51].copy()
    assert one.shape == two.shape == (1, 3, man.hidden_size)
    np.testing.assert_allclose(one, two, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(kv_one, kv_two, rtol=1e-3, atol=1e-3)
    # a step after them reads the positions the other session wrote
    nxt = dec.forward(np.array([[99]], dtype=np.int64), 51, step=True)
    assert np.isfinite(nxt).all()


def test_one_thread_or_switched_off_means_one_session(model_dir, monkeypatch):
    monkeypatch.delenv("FLINT_HEAD_THREADS", raising=False)
    man = load_manifest(model_dir)
    head_threads = _head_threads
    assert OnnxDecoder(model_dir, man, threads=1, capacity=256, batch_max=1).step_session is None
    off = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1, step_session=False)
    assert off.step_session is None and head_threads(off) == 2  # the heads as the prompt pass
    on = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1)
    assert on.step_session is not None and head_threads(on) == 1  # a step asks the head: on one thread too


def test_the_warm_up_keeps_the_step_session_only_where_one_thread_steps_nearly_as_fast(model_dir, monkeypatch):
    monkeypatch.delenv("FLINT_HEAD_THREADS", raising=False)
    man = load_manifest(model_dir)
    prompt = np.array([[100 + (i * 37) % 20000 for i in range(40)]], dtype=np.int64)
    keep = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1)
    keep.forward(prompt, 0)
    one, many = keep.settle_steps(40, limit=1e6)
    assert one > 0 and many > 0
    assert keep.step_session is not None and _head_threads(keep) == 1
    drop = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1)
    drop.forward(prompt, 0)
    assert drop.settle_steps(40, limit=0.0) is not None
    assert drop.step_session is None and _head_threads(drop) == 2  # the heads as the prompt pass again
    ref = drop.forward(np.array([[1234]], dtype=np.int64), 40)  # a step now runs on the threads' session
    assert np.isfinite(drop.forward(np.array([[1234]], dtype=np.int64), 40, step=True)).all()
    np.testing.assert_allclose(drop.forward(np.array([[1234]], dtype=np.int64), 40, step=True), ref, rtol=1e-5,
                               atol=1e-5)
    assert drop.settle_steps(40, limit=0.0) is None  # nothing left to decide
    # the engine decides at its warm-up unless the setting says; either way it still completes
    from engine.config import EngineConfig
    from engine.engine import Engine

    forced = Engine.load(model_dir, config=EngineConfig(threads=2, step_session=True, step_wall_limit=0.0))
    assert forced.decoder.step_session is not None  # told: no timing overrides it
    auto = Engine.load(model_dir, config=EngineConfig(threads=2, step_wall_limit=0.0))
    assert auto.decoder.step_session is None
    assert auto.complete("def add(a, b):\n    return", "\n")[0][0].finish_reason
