"""The replay corpus's TRAIN split (issue 49): more code to learn from and to debug on than the tuning half holds.

The learned gate (scripts/train_gate.py) learns from typing records; the tuning half alone gave it 84 functions in five
languages. This split adds further pinned packages per language, none of the tuning/validation corpus's, none of the
test split's, none of the packages other benchmarks type and none of Flint's dependencies or test fixtures, fetched
and checked as the test split's are (an exact version, the archive's sha256 before it is unpacked:
replay_test_split.py). It is typed like the tuning half: any arms, any sizing, never ledgered, and its functions may
be read while debugging; ``bench_replay.py --records`` and ``train_gate.py`` take it beside tuning. Validation and
test never train the gate.

- Python: ``PER_PACKAGE`` functions from each of twenty pure-Python wheels (fewer where a package has fewer);
- JavaScript, TypeScript (npm tarballs), Go, Rust (Debian source packages): five or six packages each.

``python scripts/replay_train_split.py [LANGUAGE] [CACHE]`` prints the list.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import replay_test_split as pinned_split  # noqa: E402
from replay_corpus import Segment, Spec  # noqa: E402

SPLIT = "train"
LEARNS_FROM = ("tuning", SPLIT)  # the splits the learned gate may learn from: never validation or test
PER_PACKAGE = 8
CACHE = Path.home() / ".cache" / "flint-bench" / "train"
# (package, version, sha256 of the wheel) — as pip downloaded them on 2026-12-01
PYPI: tuple[tuple[str, str, str], ...] = (
    ("arrow", "1.4.0", "749f0769958ebdc79c173ff0b0670d59051a535fa26e8eba02953dc19eb43205"),
    ("bottle", "0.13.4", "045684fbd2764eac9cdeb824861d1551d113e8b683d8d26e296898d3dd99a12e"),
    ("colorama", "0.4.6", "4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6"),
    ("decorator", "5.3.1", "f47fe6fdbd2edd623ecfe36875d37aba411624e2670dd395dddae1358689bb3c"),
    ("dill", "0.4.1", "1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d"),
    ("feedparser", "6.0.14", "e35e3f760151b0c3b22cac9684155cae186a233e16c49bcbc6c49e91e3131137"),
    ("itsdangerous", "2.2.0", "c6242fc49e35958c8b15141343aa660db5fc54d4f13a1db01a3f5891b98700ef"),
    ("lark", "1.3.1", "c629b661023a014c37da873b4ff58a817398d12635d3bbb2c5a03be7fe5d1e12"),
    ("mako", "1.4.3", "723296007c870bfd6b3f0c3230dba7198096e5269297ebf5e4eff9e7ffa39d4f"),
    ("mistune", "3.4.0", "d03cec4c8620f21517a996d82d14f3b59c30d79bda2cc6c56bd32b839f18ce6b"),
    ("natsort", "8.4.0", "4732914fb471f56b5cce04d7bae6f164a592c7712e1c85f9ef585e197299521c"),
    ("parsimonious", "0.11.0", "32e3818abf9f05b3b9f3b6d87d128645e30177e91f614d2277d88a0aea98fae2"),
    ("prettytable", "3.18.0", "b3346e0e6f79180833aebaac088ae926340586cf6d7d991b9eb125b65f72313a"),
    ("pyasn1", "0.6.5", "4017b0fce125096b8573b39c989fdb1a4b19cf761e683398184550fea0e66587"),
    ("pycparser", "3.12", "a076f3f489b39b43ed13563a1dafe42447445bec2e294154ec5c57fcdda4c85e"),
    ("python-slugify", "9.2.0", "7298dcfc65e9ccdf834b3c398f163af0d09a9a8fc1ee6a7b2dffd8d38bfb756e"),
    ("semver", "3.1.2", "45d107c3fa880910441dfab9d555046cba2829a25feeadfe4a1566439635c510"),
    ("tenacity", "9.2.1", "9e56f17539296baab7beabb08b92f6ee3d7be92d8be72d763360677c2ad6580e"),
    ("texttable", "1.7.2", "a381e1ed30e4d4bd24cdacabe26463b7a570c0e964fc0b35d8d9276b2fcbe252"),
    ("xmltodict", "1.0.4", "a4a00d300b0e1c59fc2bfccb53d7b2e88c32f200df138a0dd2229f842497026a"),
)


def other_packages() -> dict[str, tuple]:
    """language -> ((replay_languages.Package, sha256 of the downloaded archive), ...): npm pack / apt-get download
    on 2026-12-01."""
    p = pinned_split._pkg
    go, cargo = "usr/share/gocode/src", "usr/share/cargo/registry"
    return {
        "javascript": (
            p("npm", "express", "4.21.2", "package/lib", ".js",
              "fc43a91e7dc7affb53c6ad7123a4f35485ed3c45226ae7a3847b7738e783e008"),
            p("npm", "handlebars", "4.7.10", "package/lib", ".js",
              "14f356e6cadb5b064a156d2b39dd843abba8f4b1a38ee036935adecc1a13ad9f"),
            p("npm", "jquery", "4.0.0", "package/src", ".js",
              "7ac123e4992439dc6a966cb4444fceb7f4698db94904a1256df542d5deb80f59"),
            p("npm", "koa", "3.3.0", "package/lib", ".js",
              "2b1cae002c5c8a066b9c77ac9bf197e2369ba8501fb76b75c9f21d474ef02cf4"),
            p("npm", "luxon", "3.7.2", "package/src", ".js",
              "498078da47254917ea264631160880fec8936994de3e6271e9c75c542bd35832"),
            p("npm", "ws", "8.23.0", "package/lib", ".js",
              "b8bd105a274ae9ca114f8c6ce4d9dbb0c764fe5118ba633c557e1703e297c587"),
        ),
        "typescript": (
            p("npm", "@reduxjs/toolkit", "2.15.0", "package/src", ".ts",
              "20424372851b608ae3b504eb06d93d6bb80f53217e4a0c3f3a558303a115b87e"),
            p("npm", "@tanstack/form-core", "1.33.5", "package/src", ".ts",
              "086165f02c5208fb01dab15e3a9b1c6bf2247fb2c9576f1ac138fe73c11330d7"),
            p("npm", "@tanstack/router-core", "1.171.39", "package/src", ".ts",
              "0c9345f2830bda69901d464a293d101f10635d3c935f7f1e310681b71bd2e962"),
            p("npm", "@tanstack/store", "0.11.2", "package/src", ".ts",
              "4472c964bf8a872bfe518f647a425e5ea1cef1eb88402a30f77a229f018aaa14"),
            p("npm", "@trpc/server", "11.25.2", "package/src", ".ts",
              "43d5562bf3d3ca2ba55bb37a91020c19d90ddaa3359a1eb55e5fefc62c6cb29a"),
        ),
        "go": (
            p("deb", "golang-github-burntsushi-toml-dev", "1.2.0-2", f"{go}/github.com/BurntSushi/toml", ".go",
              "eb0bc9f96d02b33034311604f787ca7ab071de026c9abdffa6ae40a63362f7b8"),
            p("deb", "golang-github-gorilla-mux-dev", "1.8.0-1", f"{go}/github.com/gorilla/mux", ".go",
              "0880a4019fe68496a0e0a749c2948c029e489f49edd448bed2fedaba33f848c2"),
            p("deb", "golang-github-sirupsen-logrus-dev", "1.9.0-1", f"{go}/github.com/sirupsen/logrus", ".go",
              "51fb87b05452e96be38b97c03d5f997f6ce3a144421f911338d6c4ea2e8aa118"),
            p("deb", "golang-github-spf13-cobra-dev", "1.6.1-1", f"{go}/github.com/spf13/cobra", ".go",
              "4f5d20855133319beef3c5b49d3c21a0406f270bf94fb4b6f4d406b691283cb2"),
            p("deb", "golang-gopkg-yaml.v3-dev", "3.0.1-3", f"{go}/gopkg.in/yaml.v3", ".go",
              "3ad4febd49700bc670f0f143f3291ecab4e032cc227d69521bacadbc493cfbbe"),
        ),
        "rust": (
            p("deb", "librust-indexmap-dev", "1.9.2-1", f"{cargo}/indexmap-1.9.2/src", ".rs",
              "691b9efb8df4abdfdb238713c1f66416f31e2c2a33fd15687aae2c4dcb9b5308"),
            p("deb", "librust-itertools-dev", "0.10.3-1", f"{cargo}/itertools-0.10.3/src", ".rs",
              "3e13fc328508275c2c84270133f41a300ffb58b9b77001b89373ba7f7ab57fde"),
            p("deb", "librust-log-dev", "0.4.17-3", f"{cargo}/log-0.4.17/src", ".rs",
              "bd34d9fc5aaa80121cb1446f848ec99993f97c18f743bcb3f6c4824644c1d0cd"),
            p("deb", "librust-regex-syntax-dev", "0.6.27-1", f"{cargo}/regex-syntax-0.6.27/src", ".rs",
              "16c9879e07d6f9c6b2618906126d17e51ec8b04bced0fe3bb0cf0f3062f8a353"),
            p("deb", "librust-serde-json-dev", "1.0.87-1", f"{cargo}/serde_json-1.0.87/src", ".rs",
              "2d053de630af6649c40a39d9ab6268d5469385289016a1205d0dec196e7b77d2"),
        ),
    }


def choose(language: str, cache: Path = CACHE) -> list[Spec]:
    """The train split's functions of ``language``, in (package, module, qualname) order."""
    return pinned_split.choose(language, cache, pypi=PYPI, others=other_packages(), split=SPLIT,
                               per_package=PER_PACKAGE)


def segments(language: str, specs: list[Spec], cache: Path = CACHE) -> list[Segment]:
    return pinned_split.segments(language, specs, cache, pypi=PYPI, others=other_packages(), split=SPLIT)


def pinned(language: str) -> list[str]:
    return pinned_split.pinned(language, pypi=PYPI, others=other_packages())


if __name__ == "__main__":  # python scripts/replay_train_split.py [LANGUAGE] [CACHE]
    lang = sys.argv[1] if len(sys.argv) > 1 else "python"
    specs = choose(lang, Path(sys.argv[2]) if len(sys.argv) > 2 else CACHE)
    for s in specs:
        print(f"{s.key}  ({s.chars} chars)")
    print(f"{len(specs)} functions, {len({s.package for s in specs})} packages, {sum(s.chars for s in specs)} chars")
