"""Monitor-guided decoding (issue 35; Agrawal et al., NeurIPS 2023): at trigger points (after ``obj.``, at a
name in an expression) static analysis says which names are valid there, and the next-token choices are
restricted to tokens that continue one of them.

- ``monitor``: the pure parts: when the monitor applies (``trigger``), what an analyser returns
  (``Candidates``) and the ``Analyser`` protocol other analysers plug into.
- ``jedi_analyser``: Python names through jedi (cached, bounded in memory, run against a deadline);
  ``call`` runs other jedi work on its thread (engine/context/jedi_source.py).
- ``trie``: token ids that continue a candidate name, per vocabulary, and the logit mask.
- ``guide``: one generation's monitor: the mask for the next token and the check of one token (names that
  start inside a token, like ``.attr``, included).
- ``checker``: names in a finished suggestion that do not exist (the benchmark's measure).

Nothing here imports the decode loop, pygls or lsprotocol; see docs/guidance.md for the integration.
"""
