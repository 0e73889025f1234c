"""Config validation: one clear error naming the field, before any work starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clonemem.schemas.config import ROLES, ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text, "utf-8")
    return path


def test_defaults_are_offline_for_every_role() -> None:
    config = load_config(None)
    assert all(config.models.ref(role).provider == "offline" for role in ROLES)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[models]\ngenerator = "foo/bar"', "models.generator: unknown provider 'foo'"),
        ('[models]\njudge = "gpt-4o"', "models.judge: expected 'provider/model'"),
        (
            "[generation]\npersonas = -1",
            "generation.personas: Input should be greater than or equal to 1",
        ),
        (
            "[generation]\nnoise_traces_per_phase = -3",
            "generation.noise_traces_per_phase: Input should be greater than or equal to 0",
        ),
        ("[generation]\npersonnas = 2", "generation.personnas: unknown field"),
        ("colour = 'blue'", "colour: unknown field"),
        ("[generation.media_mix]\nfax = 1.0", "generation.media_mix: unknown medium 'fax'"),
        (
            '[models]\nqa_writer = "offline/x"\nvalidator = "offline/x"',
            "validator must be a different model",
        ),
        ("[providers.offline]\nmalformed_rate = 1.5", "providers.offline.malformed_rate"),
        ('[generation]\nlanguage = "fr"', "generation.language"),
    ],
)
def test_invalid_configs_name_the_field(tmp_path: Path, toml: str, expected: str) -> None:
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: invalid configuration")
    assert expected in str(err.value)


def test_missing_key_for_live_provider(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    path = write(tmp_path, '[models]\ngenerator = "anthropic/claude-haiku-4-5"')
    with pytest.raises(
        ConfigError,
        match=r"models.generator: anthropic/claude-haiku-4-5 needs an API key in \$ANTHROPIC_API_KEY",
    ):
        load_config(path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert load_config(path).models.generator == "anthropic/claude-haiku-4-5"


def test_keyless_local_endpoint(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[models]\nanswerer = "openai/llama3.1:8b"\n'
        '[providers.openai]\napi_key_env = ""\nbase_url = "http://127.0.0.1:11434/v1"',
    )
    assert load_config(path).providers.openai.base_url == "http://127.0.0.1:11434/v1"


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "run.toml"
    path.write_text('warehouse = "data/wh.duckdb"\n', "utf-8")
    assert load_config(path).warehouse == tmp_path / "conf" / "data" / "wh.duckdb"


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[generation\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml")


def test_shipped_configs_load(monkeypatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(var, "k")
    folder = Path(__file__).parent.parent / "configs"
    names = sorted(p.name for p in folder.glob("*.toml"))
    assert names == [
        "demo-zh.toml",
        "demo.toml",
        "gym-base.toml",
        "gym-extra.toml",
        "live-example.toml",
        "tiny.toml",
    ]
    for path in folder.glob("*.toml"):
        load_config(path)


def test_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (
        str(err.value)
        == f"{path}: not UTF-8 text (byte 0xe9 at offset 11); save the config as UTF-8"
    )


def test_config_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes('\ufeffname = "bom"\n'.encode("utf-8"))
    assert load_config(path).name == "bom"


def test_folder_given_as_config_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(err.value) == f"{tmp_path}: is a folder, not a config file (pass a .toml file)"


@pytest.mark.parametrize("text", ["", "\n# only a comment\n   \n"])
def test_empty_config_is_refused_unless_allowed(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(
        ConfigError, match="the config file is empty; add settings, or pass --allow-empty-config"
    ):
        load_config(path)
    assert load_config(path, allow_empty=True) == load_config(None)


def test_field_errors_and_missing_keys_are_listed_together(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    path = write(
        tmp_path,
        '[models]\ngenerator = "anthropic/claude-haiku-4-5"\n[generation]\npersonas = -1\ncolour = 1',
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{path}: invalid configuration"
    assert any(line.startswith("  generation.personas:") for line in lines)
    assert any(line.startswith("  generation.colour: unknown field") for line in lines)
    assert any(
        "models.generator: anthropic/claude-haiku-4-5 needs an API key in $ANTHROPIC_API_KEY"
        in line
        for line in lines
    )


# -- extends ----------------------------------------------------------------------------------------

GYM_EXTRA_WHOLE = """
name = "gym-extra"
seed = 42
[generation]
personas = 2
language = "en"
span_years = 1.0
major_events = 4
[gym]
periods = 20
states_per_question = 3
turns_per_exposure = 10
questions = 10
variables = 6
k = 10
min_exposure_rate = 0.95
reference = "oracle_states"
[providers.offline]
latency_ms = 0
"""


def test_the_extra_gym_preset_is_the_base_with_what_it_changes() -> None:
    import tomllib

    from clonemem.schemas.config import RunConfig

    presets = Path(__file__).parent.parent / "configs"
    extra_text = (presets / "gym-extra.toml").read_text("utf-8")
    assert "[generation]" not in extra_text  # written once, in the base
    assert load_config(presets / "gym-extra.toml") == RunConfig.model_validate(
        tomllib.loads(GYM_EXTRA_WHOLE)
    )


def test_a_config_extends_another_key_by_key_with_paths_relative_to_each_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "base.toml").write_text(
        'name = "base"\nwarehouse = "data/wh.duckdb"\n[generation]\npersonas = 3\nlanguage = "zh"\n',
        "utf-8",
    )
    child = tmp_path / "child.toml"
    child.write_text(
        'extends = "presets/base.toml"\nname = "child"\n[generation]\npersonas = 1\n', "utf-8"
    )
    config = load_config(child)
    assert (config.name, config.generation.personas, config.generation.language) == (
        "child",
        1,
        "zh",
    )
    assert (
        config.warehouse == tmp_path / "presets" / "data" / "wh.duckdb"
    )  # relative to the base's file


def test_a_bad_extends_is_one_error_naming_the_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('extends = "b.toml"\nname = "a"\n', "utf-8")
    b.write_text('extends = "a.toml"\nname = "b"\n', "utf-8")
    with pytest.raises(ConfigError) as circle:
        load_config(a)
    assert str(circle.value) == (
        f"{a}: extends b.toml: {b}: extends: a.toml is already being read ({a} -> {b} -> {a})"
    )
    a.write_text('extends = "missing.toml"\nname = "a"\n', "utf-8")
    with pytest.raises(
        ConfigError,
        match=rf"^{a}: extends missing.toml: {tmp_path}/missing.toml: no such config file$",
    ):
        load_config(a)
    a.write_text('extends = 3\nname = "a"\n', "utf-8")
    with pytest.raises(
        ConfigError, match=r"a.toml: extends: the path of another config file, got 3$"
    ):
        load_config(a)
