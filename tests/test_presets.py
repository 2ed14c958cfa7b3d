"""Presets: ``--preset`` picks a named config, ``--steps``/``--seeds`` and ``--set`` apply on top, in that order."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.core.config import setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import Study, resolve_study_config


@dataclass(frozen=True)
class ToyConfig:
    steps: int = setting(100, "training steps")
    seeds: int = setting(1, "seeds")
    lr: float = setting(1e-3, "learning rate")


TOY = Study(name="toy", summary="toy", default_config=ToyConfig, run=lambda config, ctx: {},
            presets={"paper": lambda: ToyConfig(steps=5000, lr=5e-4)})


def test_default_and_named_presets_give_their_configs():
    assert resolve_study_config(TOY) == ToyConfig()
    assert resolve_study_config(TOY, "paper") == ToyConfig(steps=5000, lr=5e-4)


def test_flags_then_overrides_apply_on_top_of_the_preset():
    config = resolve_study_config(TOY, "paper", ["lr=0.1"], steps=7, seeds=None)
    assert config == replace(ToyConfig(steps=5000, lr=5e-4), steps=7, lr=0.1)
    # --set wins over --steps: the override is applied last
    assert resolve_study_config(TOY, "paper", ["steps=9"], steps=7).steps == 9


def test_unknown_preset_is_a_config_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"'papr'.*default, paper"):
        resolve_study_config(TOY, "papr")


def test_cli_unknown_preset_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(tmp_path / "r"), "--preset", "nope"])
    assert result.exit_code == 2
    assert "--preset 'nope'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_cli_config_names_the_preset(tmp_path):
    result = CliRunner().invoke(app, ["config", "single-layer", "--preset", "default"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("single-layer, preset default")


def test_docs_departures_table_is_rendered_from_the_list():
    from pathlib import Path

    from icl_gd.claims.departures import DEPARTURES, TABLE_END, TABLE_START, departures_table_markdown
    from icl_gd.studies import get_study, study_names

    text = (Path(__file__).resolve().parents[1] / "docs" / "departures.md").read_text()
    block = text[text.index(TABLE_START):text.index(TABLE_END) + len(TABLE_END)]
    assert block == departures_table_markdown(), "run: python -m icl_gd.claims.departures docs/departures.md"
    for departure in DEPARTURES:  # each row names a study that really has the paper preset it departs from
        assert departure.study in study_names() and "paper" in get_study(departure.study).preset_names()
