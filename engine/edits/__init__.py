"""Next edits (issue 37): after the user changes one place, the change that follows.

- ``history``: per-document recent edits as small diffs (bursts of keystrokes coalesced), bounded.
- ``exact``: next edits that need no model and are right every time: the remaining references of a
  renamed name (jedi, ``rename``), the other occurrences of a literal replaced once (``repeat``);
  ``common`` holds what they share.
- ``prompt``: the model's next-edit prompt (recent edits as diffs, an editable window with the cursor) for
  the Qwen2.5-Coder Instruct checkpoints, and the parser of its answer.

Nothing here imports the LSP server or its types: offsets are plain string offsets.
"""
