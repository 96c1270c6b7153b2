"""`flint model`: build, list and remove model directories (engine/model/)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_model_build(args: argparse.Namespace) -> int:
    from engine.model.build import BuildError, build_preset

    try:
        if args.from_hf:
            from engine.model.hf_build import build_from_hf

            path = build_from_hf(Path(args.from_hf), name=args.name, precision=args.precision or "int4",
                                 force=args.force)
        else:
            path = build_preset(args.model, args.precision, force=args.force, keep_gguf=args.keep_gguf)
    except BuildError as e:
        print(f"flint: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def cmd_model_list(args: argparse.Namespace) -> int:
    from engine.model.build import disk_bytes, list_models
    from engine.model.presets import PRESETS

    built = list_models()
    sizes = {m.path: disk_bytes(Path(m.path)) for m in built}
    if args.json:
        print(json.dumps([{"name": m.name, "precision": m.precision, "path": m.path, "fim": m.fim is not None,
                           "disk_bytes": sizes[m.path], "source": m.source} for m in built], indent=2))
        return 0
    print("built models:")
    for m in built:
        print(f"  {m.name:<22} {m.precision:<9} {sizes[m.path] / 1e6:>6.0f} MB  fim={'yes' if m.fim else 'no ':<3} "
              f"{m.path}")
    if not built:
        print("  (none)  build one with: flint model build")
    print("presets:")
    for p in PRESETS.values():
        print(f"  {p.name:<22} {p.description}")
    return 0


def cmd_model_remove(args: argparse.Namespace) -> int:
    """Delete the named model directories Flint built (engine/model/remove.py), and with --gguf the GGUFs it
    downloaded; the model `flint serve` loads by default only with --force. Nothing is deleted unless every
    name is one Flint may remove."""
    from engine.engine import ModelNotBuilt, resolve_model_dir
    from engine.model.build import disk_bytes
    from engine.model.export import BuildError
    from engine.model.presets import DEFAULT_MODEL
    from engine.model.remove import downloaded_ggufs, find_model_dir, remove_dir

    if not args.names and not args.gguf:
        print("flint: name the model directories to remove (`flint model list` shows them), or pass --gguf",
              file=sys.stderr)
        return 2
    try:
        dirs = list(dict.fromkeys(find_model_dir(n) for n in args.names))
    except BuildError as e:
        print(f"flint: {e}", file=sys.stderr)
        return 2
    try:
        default = resolve_model_dir(DEFAULT_MODEL).resolve()
    except ModelNotBuilt:
        default = None
    kept = [d for d in dirs if d.resolve() == default]
    if kept and not args.force:
        print(f"flint: {kept[0].name} is the model `flint serve` loads by default ({DEFAULT_MODEL}); pass --force "
              f"to remove it too (then `flint model build` builds it again). Nothing was removed.", file=sys.stderr)
        return 2
    files = downloaded_ggufs() if args.gguf else []
    for d in dirs:
        size = disk_bytes(d)
        remove_dir(d)
        print(f"removed {d} ({size / 1e6:.0f} MB)")
    for f in files:
        size = f.stat().st_size
        f.unlink()
        print(f"removed {f} ({size / 1e6:.0f} MB)")
    if args.gguf and not files:
        print("no downloaded GGUF to remove")
    return 0


def add_model_commands(sub) -> None:
    pm = sub.add_parser("model", help="build, list and remove models")
    msub = pm.add_subparsers(dest="model_cmd", required=True)
    pb = msub.add_parser("build", help="build a Flint model directory (offline)")
    pb.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b", help="preset name")
    pb.add_argument("-p", "--precision", choices=["gguf", "int8", "int4", "fp32", "int4-mixed", "int8-dyn"],
                    default=None, help="gguf: the file's own blocks, exactly; int8/int4: rounded again onto 8-bit "
                    "blocks of 128 / 4-bit blocks of 32; fp32: the reference; int4-mixed, int8-dyn and --from-hf "
                    "need the export extra")
    pb.add_argument("--keep-gguf", action="store_true", help="keep the downloaded GGUF under FLINT_HOME/gguf "
                    "(by default it is deleted once the model is built: it can be fetched again)")
    pb.add_argument("--from-hf", metavar="DIR", help="a local Hugging Face causal-LM directory")
    pb.add_argument("--name", help="name for --from-hf builds")
    pb.add_argument("--force", action="store_true", help="rebuild even if a complete build exists")
    pb.set_defaults(func=cmd_model_build)
    pl = msub.add_parser("list", help="list built models and presets")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_model_list)

    pr = msub.add_parser("remove", help="delete model directories Flint built (names as `flint model list` "
                         "shows their directories) and, with --gguf, the GGUFs it downloaded")
    pr.add_argument("names", nargs="*", metavar="NAME", help="a model directory's name (qwen2.5-coder-0.5b-fp32) "
                    "or its path in FLINT_HOME/models")
    pr.add_argument("--gguf", action="store_true", help="also delete the downloaded GGUF files in FLINT_HOME/gguf "
                    "(a build fetches them again)")
    pr.add_argument("--force", action="store_true", help="remove the model `flint serve` loads by default too")
    pr.set_defaults(func=cmd_model_remove)
