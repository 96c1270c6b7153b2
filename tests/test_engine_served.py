"""What the engine serves at the spots the editor asks most (real default model): an emptied indented line
is never answered with blanks, and an explicit request's variants end when their statement is done, not at
the deadline."""

from __future__ import annotations

import time

import pytest

from engine.types import GenParams

pytestmark = pytest.mark.model

PREFIX = ("import os\n\n\ndef count_words(path):\n    \"\"\"How often each word occurs in the file.\"\"\"\n"
          "    counts = {}\n    with open(path) as f:\n        text = f.read()\n    ")
SUFFIX = "\n    return counts\n\n\ndef main():\n    print(count_words(os.sys.argv[1]))\n"


def test_an_emptied_indented_line_gets_code_and_variants_stop_when_settled(engine):
    engine.reset()
    (line,), _ = engine.complete(PREFIX, SUFFIX, GenParams(max_tokens=48, max_lines=1))
    assert line.text.strip(), f"blank answer {line.text!r} ({line.finish_reason})"
    assert line.text == line.text.lstrip(), "the cursor's indentation is already typed"
    deadline = time.monotonic() + 60.0
    comps, _ = engine.complete(PREFIX, SUFFIX, GenParams(max_tokens=216, max_lines=9, n=3, deadline=deadline))
    for c in comps:
        assert c.finish_reason in ("stop", "eos"), (c.finish_reason, c.text)
        assert c.text.strip()
        # a settled text ends with its statement: no later line at the cursor's indentation
        assert c.finish_reason == "eos" or not any(ln.startswith("    ") and not ln.startswith("     ") for ln in c.text.split("\n")[1:]), c.text
