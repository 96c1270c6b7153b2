"""Next edits (issue 37): after the user changes one place, the change that follows.

- ``history``: per-document recent edits as small diffs (bursts of keystrokes coalesced), bounded.
- ``exact``: next edits that need no model and are right every time: the remaining references of a
  renamed name (jedi, ``rename``; in the other open documents, ``workspace``, and the workspace's files on
  disk that import it, ``ondisk``), the other occurrences of a
  literal replaced once (``repeat``), a function's call sites after a parameter was renamed, removed or
  added (``signature``, pure; ``callsites``, jedi); ``common`` holds what they share.
- ``plan``: which of a computation's edits are left once some are applied (no new computation).
- ``fill``: the model's argument at a jump target (the prompt, the cut, the floor); ``scope``: the caller's
  names in scope there (jedi), for the prompt.
- ``prompt``: the model's next-edit prompt (recent edits as diffs, an editable window with the cursor) for
  the Qwen2.5-Coder Instruct checkpoints, and the parser of its answer.

Nothing here imports the LSP server or its types: offsets are plain string offsets.
"""
