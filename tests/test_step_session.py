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


@pytest.mark.parametrize("waited", [True, False])
def test_a_waited_generation_steps_on_every_thread(engine, monkeypatch, waited):
    """While someone waits for a generation (CancelToken.waited), its decoding steps run on the prompt
    pass's session; speculation's on the one-thread session."""
    from engine.types import CancelToken, GenParams

    dec, calls = engine.decoder, []
    real = dec.forward

    def spy(ids, past_len, step=False):
        calls.append((ids.shape[1], step))
        return real(ids, past_len, step=step)

    monkeypatch.setattr(dec, "forward", spy)
    tok = CancelToken()
    tok.waited_if = lambda: waited
    prefix = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
    comps, t = engine.complete(prefix, "\n", GenParams(max_tokens=12), cancel=tok)
    steps = [c for c in calls if c[0] <= 1 + engine.fast.max_draft]  # a step: the pending token and drafts
    assert comps and len(steps) >= 2
    assert all(step is not waited for _, step in steps)
    assert not any(step for n, step in calls if n > 1 + engine.fast.max_draft)  # prompt passes: never


def test_a_job_is_waited_while_a_request_waits_or_the_user_waits_at_its_spot():
    from engine.types import GenParams
    from lsp_server.completion.jobs import Job, Life, State

    job = Job(State("file:///a.py", 1, 0, "x = ", "", "single", GenParams()), priority=0, seq=1)
    assert not job.cancel.waited  # nobody waits yet
    job.waiters = 1
    assert job.cancel.waited
    assert not job.leave(Life.BACKGROUND) and not job.cancel.waited  # let go: speculation
    job.life = Life.AWAITED
    assert job.cancel.waited
    job.life = Life.ENDED
    assert not job.cancel.waited
