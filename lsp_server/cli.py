"""The `flint` command: model build/list, complete, serve, stats."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from engine.context.workspace import DEFAULT_BUDGET
from lsp_server.cli_model import add_model_commands
from lsp_server.settings import Settings

SHUTDOWN_BUDGET_S = 0.5  # after exit or a lost connection: time for the session to stop, then the process ends


def _setup_logging(verbose: bool) -> None:
    # stdout is the protocol in stdio mode: logs always go to stderr (secrets redacted: lsp_server/logs.py)
    from lsp_server import logs

    logs.register_env_secrets()
    logs.setup(verbose)


def _parse_location(loc: str) -> tuple[Path, int, int]:
    """FILE:LINE:COL, 1-based line and column (column in characters), as compilers print them."""
    parts = loc.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"expected FILE:LINE:COL (1-based), got {loc!r}")
    return Path(parts[0]), int(parts[1]), int(parts[2])


def _context_block(path: Path, text: str, offset: int, args: argparse.Namespace, count):
    """The repository context for a one-off completion: the workspace is ``--root`` (default: the current
    directory if it holds the file, else the file's folder); ``--open`` files stand for the editor's tabs."""
    from engine.context.workspace import Workspace

    if args.context_budget <= 0:
        return None
    file = path.resolve()
    root = Path(args.root).resolve() if args.root else Path.cwd().resolve()
    if not args.root and root not in file.parents:
        root = file.parent
    ws = Workspace([root], budget=args.context_budget)
    for other in args.open or []:
        try:
            ws.open(Path(other).resolve(), Path(other).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            logging.getLogger("flint.context").debug("--open %s skipped: %s", other, e)
    ws.open(file, text)
    return ws.gather(file, text, offset, count=count)


def cmd_complete(args: argparse.Namespace) -> int:
    import time

    from engine.text.postprocess import CUT_OFF_REASONS, budget_for, postprocess
    from engine.types import DocRef, GenParams

    try:
        path, line, col = _parse_location(args.location)
        text = path.read_text(encoding="utf-8")
    except (ValueError, OSError) as e:
        print(f"flint: {e}", file=sys.stderr)
        return 2
    lines = text.split("\n")
    if not (1 <= line <= len(lines)) or not (1 <= col <= len(lines[line - 1]) + 1):
        print(f"flint: position {line}:{col} is outside {path}", file=sys.stderr)
        return 2
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + col - 1
    prefix, suffix = text[:offset], text[offset:]
    t0 = time.perf_counter()
    eng = _load_for_complete(args)
    if eng is None:
        return 2
    load_s = time.perf_counter() - t0
    # the generation is sized by the context (a line, one statement, the rest of a body) unless asked
    budget = budget_for(prefix, suffix, max_lines=args.max_lines or 8)
    max_lines = args.max_lines or budget.max_lines
    params = GenParams(max_tokens=args.max_tokens or budget.max_tokens,
                       max_lines=max_lines + (1 if budget.mode == "multi" else 0), n=args.n,
                       guidance=args.guidance, doc=DocRef(str(path.resolve()), 0))
    if args.guidance:
        _warm_guidance(eng, args, path, prefix, suffix)
    eng.set_context(_context_block(path, text, offset, args, lambda s: len(eng.tok.encode(s))))
    comps, t = eng.complete(prefix, suffix, params)
    # what an editor would show: the server's post-processing (one line or a block, cut where the model
    # runs past the code or repeats the text after the cursor)
    shown = [postprocess(c.text, prefix, suffix, mode=budget.mode, max_lines=max_lines,
                         truncated=c.finish_reason in CUT_OFF_REASONS) for c in comps]
    _print_completions(args, eng, load_s, budget.mode, comps, t, shown)
    return 0


def _warm_guidance(eng, args: argparse.Namespace, path: Path, prefix: str, suffix: str) -> None:
    """The monitor as in an editor that has had the file open a while: the token trie built, jedi has read
    the file (its line's names in scope and the name at the cursor answered)."""
    from engine.guidance.guide import Guide

    g = eng.enable_guidance(wait=True)
    if args.root:
        g.add_root(str(Path(args.root).resolve()))
    doc = str(path.resolve())
    g.warm(prefix, suffix, path=doc, version=0, timeout=10.0)
    guide = g.guide(prefix, suffix, b"", path=doc, version=0, language=None)
    if isinstance(guide, Guide):
        guide.prefetch(timeout=10.0)


def _load_for_complete(args: argparse.Namespace):
    """The model for ``flint complete`` (None: it could not be loaded; the reason is on stderr)."""
    from engine.engine import Engine, EngineConfig, ModelNotBuilt

    try:
        cfg = EngineConfig(context_tokens=max(0, args.context_budget))
        if args.threads:
            cfg.threads = args.threads
        return Engine.load(args.model, config=cfg)
    except ModelNotBuilt as e:
        print(f"flint: {e}", file=sys.stderr)
        return None
    except Exception as e:  # a damaged build (a truncated weight file, a bad tokenizer): say which, no traceback
        model_dir = _model_dir_or_name(args.model)
        print(f"flint: the model {model_dir} could not be loaded ({type(e).__name__}: {e}); rebuild it with "
              f"`flint model build --force`, or run `flint -v complete ...` for details", file=sys.stderr)
        logging.getLogger("flint").debug("load failed", exc_info=True)
        return None


def _print_completions(args: argparse.Namespace, eng, load_s: float, mode: str, comps, t, shown) -> None:
    if args.json:
        print(json.dumps({
            "model": eng.model_id, "load_s": round(load_s, 3),
            "timings": {"prompt_tokens": t.prompt_tokens, "reused_tokens": t.reused_tokens,
                        "prefill_ms": round(t.prefill_ms, 1), "ttft_ms": round(t.ttft_ms, 1),
                        "total_ms": round(t.total_ms, 1), "decode_tokens": t.decode_tokens,
                        "forward_calls": t.forward_calls, "draft_accepted": t.draft_accepted},
            "context": {"files": list(dict.fromkeys(c.split(":", 1)[0] for c in t.context)),
                        "chunks": list(t.context), "digest": eng.context_digest},
            "mode": mode,
            "guidance": t.guidance,
            "completions": [{"variant": c.variant, "text": c.text, "finish_reason": c.finish_reason,
                             "suggestion": sug.text if sug else None, "replace": sug.replace if sug else 0,
                             "ttft_ms": round(c.ttft_ms, 1), "tokens": len(c.token_ids)}
                            for c, sug in zip(comps, shown, strict=True)],
        }, indent=2))
        return
    if t.context:
        print(f"# context: {', '.join(t.context)}")
    if t.guidance and t.guidance.get("constrained"):
        changes = ", ".join(f"{c['model']!r} -> {c['chosen']!r}" for c in t.guidance["changes"])  # type: ignore[union-attr]
        print(f"# guidance: {t.guidance['constrained']} picks constrained ({changes})")
    print(f"# {eng.model_id}: load {load_s:.2f}s, prompt {t.prompt_tokens} tok, "
          f"ttft {t.ttft_ms:.0f} ms, total {t.total_ms:.0f} ms, {t.decode_tokens} tok generated")
    for c, sug in zip(comps, shown, strict=True):
        print(f"--- variant {c.variant} ({c.finish_reason}, {len(c.token_ids)} tok, ttft {c.ttft_ms:.0f} ms, "
              f"{mode}-line suggestion{'' if args.raw else '; --raw for the model text'})")
        print(c.text if args.raw else (sug.text if sug else "(nothing to show)"))


def _model_dir_or_name(model: str | None) -> str:
    from engine.engine import ModelNotBuilt, resolve_model_dir

    try:
        return str(resolve_model_dir(model))
    except ModelNotBuilt:
        return str(model)


# ---- serve / stats (the language server) ---------------------------------------------------------------

def _parse_tcp(value: str) -> tuple[str, int]:
    """HOST:PORT on a loopback address only: the server has no authentication."""
    from engine.remote.wire import is_loopback

    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    if not is_loopback(host):  # a name counts only when it resolves to loopback addresses
        raise ValueError(f"{host!r} is not a loopback address: Flint only listens on 127.0.0.1 / ::1 / localhost")
    return host, int(port)


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from lsp_server import logs
    from lsp_server.protocol.handlers import create_server
    from lsp_server.settings import parse_settings

    if args.tcp and args.stdio:
        print("flint: --stdio and --tcp exclude each other", file=sys.stderr)
        return 2
    client_log = logs.ClientLogHandler(verbose=args.verbose)
    logs.register_env_secrets()
    logs.setup(args.verbose, stderr_always=args.log_stderr, client=client_log, log_file=args.log_file)

    raw: dict[str, object] = {}
    if args.model:
        raw["model"] = args.model
    if args.threads:
        raw["threads"] = args.threads
    settings, warnings = parse_settings(raw)
    for w in warnings:
        print(f"flint: {w}", file=sys.stderr)
    if not args.verbose:
        # pygls logs every message at INFO; Flint's own lines say what matters
        logging.getLogger("pygls").setLevel(logging.WARNING)
    tcp = None
    if args.tcp:
        try:
            tcp = _parse_tcp(args.tcp)
        except ValueError as e:
            print(f"flint: {e}", file=sys.stderr)
            return 2
    server = create_server(settings)
    server.client_log = client_log
    server.session.start()  # load and warm the model now, while the editor is still starting up
    try:
        if tcp is not None:
            server.start_tcp(*tcp)
        else:
            # stdout is the protocol: keep the real one for it and send anything else printed to stderr
            proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
            sys.stdout = sys.stderr
            server.start_io(sys.stdin.buffer, proto_out)
    except Exception:  # the process ends below without unwinding: say why first
        logging.getLogger("flint.server").exception("the server stopped on an error")
        server.exit_code = 1
    finally:
        client_log.detach()
        # the engine thread may be inside a prompt chunk it cannot leave: give the session a moment to stop
        # (stats, cache), then end the process without joining any thread
        server.begin_shutdown().join(SHUTDOWN_BUDGET_S)
        logging.getLogger("flint.server").info("exiting with %d", server.exit_code)
        for h in logging.getLogger().handlers:
            h.flush()
        sys.stderr.flush()
        os._exit(server.exit_code)


def cmd_stats(args: argparse.Namespace) -> int:
    from engine.paths import stats_path
    from lsp_server import gate_user, stats
    from lsp_server.gatekeeper import GateKeeper

    if args.reset_gate:
        forgot = gate_user.reset()
        print("the gate's adjustment to you is reset" + ("" if forgot else " (it had no outcomes yet)"))
        return 0
    path = stats_path()
    summary = stats.summary(stats.load(path))
    user = gate_user.summary(prior=GateKeeper.shipped().user.prior)
    if args.json:
        print(json.dumps({**summary, "gate_user": user}, indent=2))
    else:
        print(stats.format_summary(summary, path))
        print(gate_user.format_summary(user))
    return 0


def add_server_commands(sub) -> None:
    ps = sub.add_parser("serve", help="run the language server (stdio unless --tcp)")
    ps.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default; accepted "
                    "because most clients pass it)")
    ps.add_argument("--tcp", metavar="HOST:PORT", help="listen on a loopback TCP address instead of stdio "
                    "(one client per server)")
    ps.add_argument("--log-stderr", action="store_true", help="log every line to stderr too (by default a "
                    "line the client received as window/logMessage is not repeated there)")
    ps.add_argument("--log-file", metavar="PATH", help="also log to this file")
    ps.add_argument("--model", default=None, help="preset name or model directory to load at start")
    ps.add_argument("--threads", type=int, default=None, help="onnxruntime threads")
    ps.set_defaults(func=cmd_serve)
    pt = sub.add_parser("stats", help="print local usage stats (FLINT_HOME/stats.json)")
    pt.add_argument("--json", action="store_true")
    pt.add_argument("--reset-gate", action="store_true", help="forget what the learned gate learned from your "
                    "outcomes (FLINT_HOME/gate_user.json)")
    pt.set_defaults(func=cmd_stats)


def main(argv: list[str] | None = None) -> int:
    from engine import __version__

    p = argparse.ArgumentParser(prog="flint", description="Flint: local, latency-first AI code completion")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--version", action="version", version=f"flint {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)

    add_model_commands(sub)

    pc = sub.add_parser("complete", help="print the suggestion(s) for FILE:LINE:COL (1-based) with timings")
    pc.add_argument("location", metavar="FILE:LINE:COL")
    pc.add_argument("-n", type=int, default=1, help="number of variants")
    pc.add_argument("--json", action="store_true")
    pc.add_argument("--raw", action="store_true", help="print the model's raw text, not the suggestion")
    pc.add_argument("--model", default=None, help="preset name or model directory")
    pc.add_argument("--max-tokens", type=int, default=None,
                    help="default: sized by the context (a line, a statement, the rest of a body)")
    pc.add_argument("--max-lines", type=int, default=None)
    pc.add_argument("--threads", type=int, default=None)
    pc.add_argument("--context-budget", type=int, default=DEFAULT_BUDGET,
                    help="tokens of repository context (imports, --open files) in front of the file (0: none)")
    pc.add_argument("--root", default=None, help="workspace folder imports resolve in (default: the current one)")
    pc.add_argument("--open", action="append", metavar="FILE", help="a file open in another tab (repeatable)")
    pc.add_argument("--guidance", action=argparse.BooleanOptionalAction, default=Settings().guidance,
                    help="monitor-guided decoding: names jedi knows constrain the model (Python files)")
    pc.set_defaults(func=cmd_complete)

    add_server_commands(sub)

    args = p.parse_args(argv)
    _setup_logging(args.verbose)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
