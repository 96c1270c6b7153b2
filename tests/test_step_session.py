"""Decoding steps run on a one-thread session of the decoder's graph beside the prompt pass's (engine/model/
runtime.py): the same hidden states and KV, on the real model."""

from __future__ import annotations

import numpy as np
import pytest

from engine.model.manifest import load_manifest
from engine.model.runtime import OnnxDecoder

pytestmark = pytest.mark.model


def test_a_step_on_the_one_thread_session_writes_what_the_prompt_session_would(engine):
    dec = engine.decoder
    assert dec.step_session is not None  # two threads: steps have their own session
    prompt = np.array([[100 + (i * 37) % 20000 for i in range(48)]], dtype=np.int64)
    dec.forward(prompt, 0)
    step = np.array([[1234, 56, 789]], dtype=np.int64)  # the pending token and two drafted ones
    one = dec.forward(step, 48, step=True).copy()
    kv_one = dec.kv.keys[0][0, :, 48:51].copy()
    two = dec.forward(step, 48).copy()  # the same positions again, on the prompt pass's session
    kv_two = dec.kv.keys[0][0, :, 48:51].copy()
    assert one.shape == two.shape == (1, 3, engine.manifest.hidden_size)
    np.testing.assert_allclose(one, two, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(kv_one, kv_two, rtol=1e-3, atol=1e-3)
    # a step after them reads the positions the other session wrote
    nxt = dec.forward(np.array([[99]], dtype=np.int64), 51, step=True)
    assert np.isfinite(nxt).all()


def test_one_thread_or_switched_off_means_one_session(model_dir, monkeypatch):
    monkeypatch.delenv("FLINT_HEAD_THREADS", raising=False)
    man = load_manifest(model_dir)

    def head_threads(dec: OnnxDecoder) -> int:
        return dec.heads["full"].session.get_session_options().intra_op_num_threads

    assert OnnxDecoder(model_dir, man, threads=1, capacity=256, batch_max=1).step_session is None
    off = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1, step_session=False)
    assert off.step_session is None and head_threads(off) == 2  # the heads as the prompt pass
    on = OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1)
    assert on.step_session is not None and head_threads(on) == 1  # a step asks the head: on one thread too
