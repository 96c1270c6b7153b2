"""One-token steps run on a one-thread session of the decoder's graph beside the prompt pass's (engine/model/
runtime.py): the same hidden states, on the real model."""

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
    step = np.array([[1234]], dtype=np.int64)
    one = dec.forward(step, 48).copy()
    kv_one = dec.kv.keys[0][0, :, 48].copy()
    session, dec.step_session = dec.step_session, None
    try:
        two = dec.forward(step, 48).copy()  # the same position again, on the prompt pass's session
        kv_two = dec.kv.keys[0][0, :, 48].copy()
    finally:
        dec.step_session = session
    assert one.shape == two.shape == (1, 1, engine.manifest.hidden_size)
    np.testing.assert_allclose(one, two, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(kv_one, kv_two, rtol=1e-3, atol=1e-3)
    # and a step after it reads the position the step session wrote
    nxt = dec.forward(np.array([[99]], dtype=np.int64), 49)
    assert np.isfinite(nxt).all()


def test_one_thread_or_switched_off_means_one_session(model_dir):
    man = load_manifest(model_dir)
    assert OnnxDecoder(model_dir, man, threads=1, capacity=256, batch_max=1).step_session is None
    assert OnnxDecoder(model_dir, man, threads=2, capacity=256, batch_max=1, step_session=False).step_session is None
