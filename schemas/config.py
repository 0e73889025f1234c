"""The run configuration (TOML): model roles, providers, sizes, seeds, warehouse path.

Every section forbids unknown fields, so a typo is an error naming the field, not a silent default.
Offline is the default for every role: a fresh machine runs everything with no key and no network.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from clonemem.errors import UserError
from clonemem.schemas.names import name_problem
from clonemem.schemas.question_types import names as _declared_question_types
from clonemem.schemas.question_types import rotating as _rotating_question_types

Role = Literal["generator", "qa_writer", "validator", "extractor", "answerer", "judge", "user_sim"]
ROLES: tuple[Role, ...] = (
    "generator",
    "qa_writer",
    "validator",
    "extractor",
    "answerer",
    "judge",
    "user_sim",
)
Language = Literal["en", "zh"]
# the question types are declared once, with their rules, in clonemem.schemas.question_types, and read
# from there when needed (no copy here): a name is checked against the declarations when it is validated,
# and the defaults are built from them when a config is made, so a type declared later is known from then on


def _declared_type(name: str) -> str:
    if name not in _declared_question_types():
        raise ValueError(
            f"unknown question type {name!r} (declared: {', '.join(_declared_question_types())})"
        )
    return name


QuestionType = Annotated[str, AfterValidator(_declared_type)]


def _at_most_every_type(n: int) -> int:
    if n > len(_rotating_question_types()):
        raise ValueError(
            f"at most the number of declared question types that rotate over segments "
            f"({len(_rotating_question_types())}; the privacy families are not among them)"
        )
    return n


Dimension = Literal["experience", "emotion", "opinion"]
DIMENSIONS: tuple[str, ...] = Dimension.__args__  # type: ignore[attr-defined]  # a Literal's members
Medium = Literal[
    "diary",
    "social_media",
    "chat_private",
    "chat_group",
    "email",
    "memo",
    "search_history",
    "calendar_event",
]
MEDIA: tuple[str, ...] = Medium.__args__  # type: ignore[attr-defined]  # a Literal's members
# A trace that is one turn of a recorded dialogue (LoCoMo's import): not the writer's own voice, and
# consecutive turns make a session. The one name of the medium for importers, systems and offline world.
CONVERSATION_TURN = "conversation_turn"
DIALOGUE_MEDIA: frozenset[str] = frozenset({CONVERSATION_TURN})

NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
Rate = Annotated[float, Field(ge=0.0, lt=1.0)]


class ConfigError(ValueError, UserError):
    """A configuration that cannot be used; the message names the file and the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRef(str):
    """``provider/model``; the model part may itself contain slashes (``openai/meta-llama/...``)."""

    @property
    def provider(self) -> str:
        return self.split("/", 1)[0]

    @property
    def model(self) -> str:
        return self.split("/", 1)[1]


def _model_ref(value: str) -> str:
    from clonemem.llm.registry import PROVIDERS  # names only; no provider module is imported

    provider, sep, model = value.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"expected 'provider/model', got {value!r}")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS.names())})")
    return value


class RoleModels(_Section):
    """Which ``provider/model`` plays each role."""

    generator: str = "offline/world"
    qa_writer: str = "offline/writer"
    validator: str = "offline/validator"
    extractor: str = "offline/extractor"
    answerer: str = "offline/answerer"
    judge: str = "offline/judge"
    user_sim: str = "offline/user"  # the gym's simulated user (`clonemem gym`)

    @field_validator(*ROLES)
    @classmethod
    def _ref(cls, value: str) -> str:
        return _model_ref(value)

    @model_validator(mode="after")
    def _validator_differs(self) -> RoleModels:
        if self.validator == self.qa_writer:
            raise ValueError("validator must be a different model from qa_writer")
        return self

    def ref(self, role: Role) -> ModelRef:
        return ModelRef(getattr(self, role))


# a call's default total deadline, in attempt timeouts: room for a slow reply, a retry and their backoff
CALL_DEADLINE_TIMEOUTS = 3.0


class LiveProviderSettings(_Section):
    """Settings of a live (networked) provider."""

    api_key_env: str | None = Field(
        None, description="environment variable holding the key; empty for none"
    )
    api_key_secret: str | None = Field(
        None, description="Prefect Secret block holding the key (instead of env)"
    )
    base_url: str | None = None
    max_concurrency: PosInt = 4
    timeout_s: Annotated[float, Field(gt=0)] = Field(
        120.0, description="each attempt's bound, in seconds"
    )
    # One budget per call, kept by the LLM wrapper alone (the SDK's and the step's own retries are off):
    # at most 1 + max_retries + max_validation_retries attempts, all within call_deadline_s.
    max_retries: NonNegInt = Field(
        5, description="attempts after a timeout, a failed connection, 429 or 5xx"
    )
    max_validation_retries: NonNegInt = 2
    call_deadline_s: Annotated[float, Field(gt=0)] | None = Field(
        None,
        description=f"a call's total bound in seconds, retries and waits included; default "
        f"{CALL_DEADLINE_TIMEOUTS:g} x timeout_s",
    )
    backoff_base_s: Annotated[float, Field(ge=0)] = 1.0
    backoff_max_s: Annotated[float, Field(ge=0)] = 60.0
    structured_output: Literal["native", "prompt"] = "native"
    max_output_tokens: PosInt = 8192

    @property
    def deadline_s(self) -> float:
        """The call deadline in force: the configured one, else :data:`CALL_DEADLINE_TIMEOUTS` timeouts."""
        return (
            self.call_deadline_s
            if self.call_deadline_s is not None
            else CALL_DEADLINE_TIMEOUTS * self.timeout_s
        )


class OfflineSettings(_Section):
    """The deterministic offline provider and its fault-injection knobs."""

    latency_ms: Annotated[float, Field(ge=0)] = 0.0
    transient_failure_rate: Rate = 0.0
    malformed_rate: Rate = 0.0
    max_concurrency: PosInt = 16
    max_retries: NonNegInt = 8
    max_validation_retries: NonNegInt = 4
    backoff_base_s: Annotated[float, Field(ge=0)] = 0.0
    backoff_max_s: Annotated[float, Field(ge=0)] = 0.0


BUILTIN_LIVE_PROVIDERS = ("anthropic", "gemini", "openai")


class ProvidersConfig(_Section):
    anthropic: LiveProviderSettings = LiveProviderSettings(api_key_env="ANTHROPIC_API_KEY")
    gemini: LiveProviderSettings = LiveProviderSettings(api_key_env="GEMINI_API_KEY")
    openai: LiveProviderSettings = LiveProviderSettings(api_key_env="OPENAI_API_KEY")
    offline: OfflineSettings = OfflineSettings()
    other: dict[str, LiveProviderSettings] = Field(
        default_factory=dict,
        description="settings of providers added by plugins (entry points), by provider name",
    )

    def live(self, provider: str) -> LiveProviderSettings:
        if provider in BUILTIN_LIVE_PROVIDERS:
            return getattr(self, provider)
        if provider == "offline":
            raise KeyError(f"{provider!r} is not a live provider")
        return self.other.get(provider, LiveProviderSettings())


class ModelPrice(_Section):
    """USD per million tokens."""

    input_per_mtok: Annotated[float, Field(ge=0)]
    output_per_mtok: Annotated[float, Field(ge=0)]


DEFAULT_MEDIA_MIX: dict[str, float] = {
    "diary": 0.22,
    "social_media": 0.16,
    "chat_private": 0.18,
    "chat_group": 0.10,
    "email": 0.10,
    "memo": 0.08,
    "search_history": 0.10,
    "calendar_event": 0.06,
}


class GenerationConfig(_Section):
    """Sizes of stages I–III."""

    personas: PosInt = 1
    language: Language = "en"
    start_date: dt.date = dt.date(2023, 1, 1)
    span_years: Annotated[float, Field(ge=0.25, le=3.0)] = 1.0
    major_events: PosInt = 4
    phases_per_event: PosInt = 3
    events_per_phase: PosInt = 5
    evidence_per_event: PosInt = 3
    traces_per_event: PosInt = 4
    noise_traces_per_phase: NonNegInt = 6
    arcs_per_dimension: PosInt = 1
    workers: PosInt = Field(
        64, description="LLM steps in flight; LLM calls are further limited per provider"
    )
    media_mix: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_MEDIA_MIX)
    )
    seed_pool: Path | None = Field(
        None, description="TOML file of curated event seeds; default: the packaged pool"
    )

    @field_validator("media_mix")
    @classmethod
    def _media(cls, mix: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(mix) - set(MEDIA))
        if unknown:
            raise ValueError(f"unknown medium {unknown[0]!r} (known: {', '.join(MEDIA)})")
        if not any(w > 0 for w in mix.values()):
            raise ValueError("at least one medium needs a positive weight")
        return mix


class QAConfig(_Section):
    """Stage IV: trajectory windows, quotas, distractor validation."""

    window_days: PosInt = 90
    stride_days: PosInt = 45
    questions_per_type: dict[QuestionType, NonNegInt] = Field(
        default_factory=lambda: {t: 1 for t in _declared_question_types()},
        description="per active segment, at most",
    )
    # at most every declared type that rotates (more would try a type twice on one segment)
    types_per_segment: Annotated[int, Field(ge=1), AfterValidator(_at_most_every_type)] = Field(
        default_factory=lambda: len(_rotating_question_types())
    )
    max_questions_per_persona: PosInt = 150
    distractor_rounds: PosInt = 3
    workers: PosInt = Field(
        32, description="candidate items in flight; LLM calls are further limited per provider"
    )


class GateConfig(_Section):
    """Bounds the GX gate enforces."""

    max_rejection_rate: Annotated[float, Field(ge=0, le=1)] = 0.35
    heuristic_margin: Annotated[float, Field(ge=0, le=1)] = 0.15
    media_mix_tolerance: Annotated[float, Field(ge=0, le=1)] = 0.10
    # no benchmark passes without questions: at least this many accepted per persona, and per question
    # type the config asks for (`qa.questions_per_type` above 0)
    min_questions_per_persona: NonNegInt = 1
    min_questions_per_type: NonNegInt = 1
    # LLM calls of one stage (over the benchmark's runs) that failed after their retries
    max_failed_call_share: Annotated[float, Field(ge=0, le=1)] = 0.2


# the full-context baseline's budget in tokens, when the config does not set `evaluation.full_context_tokens`
FULL_CONTEXT_TOKENS = 8000


class EvaluationConfig(_Section):
    systems: list[str] = Field(
        default_factory=lambda: [
            "oracle",
            "full_context",
            "bm25",
            "bm25_boundary",
            "dense",
            "hybrid",
            "mem0",
            "amem",
            "omem",
        ]
    )
    k: list[PosInt] = Field(default_factory=lambda: [5, 10, 20])
    full_context_tokens: PosInt = FULL_CONTEXT_TOKENS
    bootstrap_samples: PosInt = 1000
    concurrency: PosInt = 8  # answerer and judge calls in flight per (system, k, persona) batch
    workers: PosInt = (
        8  # evaluation tasks in flight: (system, persona) builds, (system, k, persona) batches
    )
    # How per-question metrics become one figure (the README's Evaluation section): the mean over all
    # questions, or the paper's mean of persona means; and whether recall leaves out questions that
    # have no evidence (the paper does) or scores them 0. Both change the numbers, so both are recorded.
    aggregate: Literal["questions", "personas"] = "questions"
    exclude_no_evidence: bool = False
    # drive every system by chronological replay (``ingest`` between questions) instead of one ``build``;
    # remote systems are always replayed
    replay: bool = False
    # remote memory systems (docs/memory-protocol.md) by name: name -> base URL; evaluate one by naming
    # it in ``systems`` / ``--systems`` (which also take a URL, or NAME=URL, directly)
    remote: dict[str, str] = Field(default_factory=dict)
    # one attempt of a call, from connecting to the reply's last byte (not per read: a trickled reply ends too)
    remote_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    remote_retries: NonNegInt = 3  # transport errors and 5xx, with exponential backoff
    remote_concurrency: PosInt = 4  # calls in flight per remote system
    # a reply's body larger than this stops the evaluation (exit 5); no more than this is read
    remote_max_reply_bytes: PosInt = 8 * 1024 * 1024
    # how long a server that indexes asynchronously (/v1/info features: async_indexing) may take to say
    # GET /v1/ready after an ingest
    remote_ready_s: Annotated[float, Field(gt=0)] = 120.0
    # The field's standard protocols (README "Standard protocols"): None computes the ones the
    # benchmark's importer declares; a list of names computes exactly those ([] none); a list of
    # changes adds ("+name") or drops ("-name") from the declared ones.
    protocols: list[str] | None = None
    # how deep a ranking of turns the retrieval-scoring protocols read (LongMemEval's recall, NDCG)
    ranking_depth: PosInt = 100

    @field_validator("remote")
    @classmethod
    def _remote(cls, v: dict[str, str]) -> dict[str, str]:
        for name, url in v.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{name}: {url!r} is not an http:// or https:// URL")
        return v


class GymConfig(_Section):
    """On-policy evaluation (`clonemem gym`, the README's Gym section): AMemGym's (N_p, N_s, N_i)."""

    periods: Annotated[int, Field(ge=1, le=50)] = 10  # N_p: state changes after the first period
    states_per_question: Annotated[int, Field(ge=1, le=3)] = (
        2  # N_s: state variables each question depends on
    )
    turns_per_exposure: Annotated[int, Field(ge=0, le=20)] = (
        4  # N_i: simulated-user turns after each opening
    )
    questions: Annotated[int, Field(ge=1, le=40)] = 10  # state-dependent questions per persona
    variables: Annotated[int, Field(ge=2, le=12)] = 6  # state variables in each persona's schema
    k: PosInt = 10  # items the assistant retrieves per reply and per question
    min_exposure_rate: Annotated[float, Field(ge=0, le=1)] = (
        0.95  # the gate: openings whose states are recovered
    )
    reference: str = "oracle_states"  # the assistant whose transcript is the off-policy history


class LoggingConfig(_Section):
    """What the warehouse keeps of each LLM call besides its accounting (the README's Warehouse section)."""

    # the prompt and the reply, with the call in `llm_calls`: of offline calls only (the default: they are
    # free and reproducible, and make the inspector readable), of every call, or of none. Never a key or
    # a header. Live prompts can be large and hold the benchmark's content: opt in with "all".
    store_calls: Literal["offline", "all", "none"] = "offline"

    def stores(self, is_live: bool) -> bool:
        return self.store_calls == "all" or (self.store_calls == "offline" and not is_live)


class RunConfig(_Section):
    """One pipeline run."""

    name: str = "demo"
    seed: int = 42
    warehouse: Path | None = None
    models: RoleModels = RoleModels()
    providers: ProvidersConfig = ProvidersConfig()
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict, description="'provider/model' -> price"
    )
    max_cost_usd: Annotated[float, Field(gt=0)] | None = Field(
        default=None,
        description="stop before a call would take this run's new spend over it (cached work is free)",
    )
    generation: GenerationConfig = GenerationConfig()
    qa: QAConfig = Field(
        default_factory=QAConfig
    )  # built when a config is made: the types declared by then
    gate: GateConfig = GateConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    gym: GymConfig = GymConfig()
    logging: LoggingConfig = LoggingConfig()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if (problem := name_problem(v)) is not None:  # the benchmark is found by it
            raise ValueError(f"the name {problem}")
        return v

    def role_settings(self, role: Role) -> LiveProviderSettings | OfflineSettings:
        ref = self.models.ref(role)
        return (
            self.providers.offline
            if ref.provider == "offline"
            else self.providers.live(ref.provider)
        )


def missing_keys(config: RunConfig, environ: dict[str, str] | None = None) -> list[str]:
    """Field paths of roles whose live provider has no key available."""
    env = os.environ if environ is None else environ
    problems = []
    for role in ROLES:
        ref = config.models.ref(role)
        if ref.provider == "offline":
            continue
        settings = config.providers.live(ref.provider)
        if settings.api_key_secret or not settings.api_key_env:
            continue  # a Secret block, or an endpoint that needs no key (a local server)
        if not env.get(settings.api_key_env):
            problems.append(
                f"models.{role}: {ref} needs an API key in ${settings.api_key_env} "
                f"(providers.{ref.provider}.api_key_env), which is not set"
            )
    return problems


def format_validation_error(source: str, exc: ValidationError) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        if msg.startswith("Value error, "):
            msg = msg.removeprefix("Value error, ")
        lines.append(f"  {field}: {msg}")
    return "\n".join(lines)


def load_config(
    path: str | Path | None = None, *, check_keys: bool = True, allow_empty: bool = False
) -> RunConfig:
    """Read and validate a TOML config (or the defaults when path is None); raise ConfigError.

    Every problem is listed at once, one per line: field errors and missing keys of live roles. A
    file with no settings at all is refused unless ``allow_empty`` (it would silently mean "all
    defaults", which is rarely what a user who passed a file wants).
    """
    if path is None:
        data: dict = {}
        source = "<defaults>"
    else:
        path = Path(path)
        source = str(path)
        data = _read_with_bases(path, ())
        if not data and not allow_empty:
            raise ConfigError(
                f"{source}: the config file is empty; add settings, or pass --allow-empty-config "
                "to run on the defaults"
            )
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = format_validation_error(source, exc).splitlines()[1:]
        if check_keys:
            problems += _missing_keys_of_partial(data)
        raise ConfigError("\n".join([f"{source}: invalid configuration", *problems])) from None
    if isinstance(path, Path):
        config = _resolve_paths(config, path.parent)
    if check_keys:
        problems = missing_keys(config)
        if problems:
            raise ConfigError(
                "\n".join([f"{source}: invalid configuration", *(f"  {p}" for p in problems)])
            )
    return config


MAX_CONFIG_BYTES = 1_000_000  # a run config is a few kB; anything near this is not one
# `extends = "other.toml"` (relative to the file): start from that file's settings; this file's values
# win, tables merge key by key (a preset repeats only what it changes)
EXTENDS = "extends"
# settings that are paths: relative in a file means relative to that file, also when it is extended
_PATHS = (("warehouse",), ("generation", "seed_pool"))


def _read_with_bases(path: Path, below: tuple[Path, ...]) -> dict:
    """The settings of a config file, over those of the file it ``extends`` (and so on)."""
    source = str(path)
    data = _read_toml(path, source)
    base = data.pop(EXTENDS, None)
    if base is None:
        return data
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{source}: extends: the path of another config file, got {base!r}")
    target = path.parent / base
    chain = (*below, path)
    if target.resolve() in {p.resolve() for p in chain}:
        raise ConfigError(
            f"{source}: extends: {base} is already being read "
            f"({' -> '.join(str(p) for p in (*chain, target))})"
        )
    try:
        inherited = _read_with_bases(target, chain)
    except ConfigError as exc:
        raise ConfigError(f"{source}: extends {base}: {exc}") from None
    for keys in _PATHS:  # the base's relative paths stay relative to the base's folder
        holder = inherited
        for key in keys[:-1]:
            nested = holder.get(key)
            holder = nested if isinstance(nested, dict) else {}
        value = holder.get(keys[-1])
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            holder[keys[-1]] = str(target.parent / value)
    return _merged(inherited, data)


def _merged(base: dict, over: dict) -> dict:
    """``base`` with ``over``'s values; a table present in both is merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merged(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def _read_toml(path: Path, source: str) -> dict:
    # checked before reading: a device (/dev/zero) or a FIFO would be read without end, or block
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{source}: not a regular file (a device, pipe or socket); pass a .toml file"
            )
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{source}: {info.st_size:,} bytes, over the {MAX_CONFIG_BYTES:,}-byte limit "
                "for a config file"
            )
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)  # bounded even if the file grew since the check
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a folder, not a config file (pass a .toml file)") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the config file: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: over the {MAX_CONFIG_BYTES:,}-byte limit for a config file")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is harmless
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save the config as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def _missing_keys_of_partial(data: dict) -> list[str]:
    """Missing keys of live roles, found even when other fields are invalid (so all problems show at once)."""
    partial = {k: data[k] for k in ("models", "providers") if k in data}
    try:
        config = RunConfig.model_validate(partial)
    except ValidationError:
        return []  # the models or providers section is itself invalid: already listed
    return [f"  {p}" for p in missing_keys(config)]


def _resolve_paths(config: RunConfig, base: Path) -> RunConfig:
    """Relative paths in a config file are relative to the file, not to the working directory."""
    updates: dict = {}
    if config.warehouse is not None and not config.warehouse.is_absolute():
        updates["warehouse"] = base / config.warehouse
    pool = config.generation.seed_pool
    if pool is not None and not pool.is_absolute():
        updates["generation"] = config.generation.model_copy(update={"seed_pool": base / pool})
    return config.model_copy(update=updates) if updates else config


def resolve_config(config: RunConfig | dict | str | Path | None) -> RunConfig:
    """A flow's ``config`` parameter: a run configuration (a mapping, as the Prefect UI's form and
    ``--params`` give it), the path of a TOML file, or None for the offline defaults.

    Errors name the deployment parameter, since that is what a deployment's user changes."""
    if config is None:
        return RunConfig()
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, (str, Path)):
        try:
            return load_config(config)
        except ConfigError as exc:
            raise ConfigError(f"flow parameter `config` (a TOML path): {exc}") from None
    try:
        return RunConfig.model_validate(config)
    except ValidationError as exc:
        raise ConfigError(
            f"flow parameter `config`: {format_validation_error('mapping', exc)}"
        ) from None
