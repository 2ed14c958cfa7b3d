import dataclasses
import json
from typing import Literal

import pytest

from icl_gd.core.config import apply_overrides, config_keys, parse_value, set_values
from icl_gd.core.errors import ConfigError, RunDirectoryError
from icl_gd.core.results import atomic_write_text, prepare_run_dir, read_json, write_csv, write_json, write_metrics


@dataclasses.dataclass(frozen=True)
class Inner:
    width: float = 1.0
    name: Literal["a", "b"] = "a"


@dataclasses.dataclass(frozen=True)
class Outer:
    n: int = 3
    flag: bool = False
    clip: float | None = None
    sizes: tuple[int, ...] = (1, 2)
    inner: Inner = dataclasses.field(default_factory=Inner)

    def __post_init__(self):
        if self.n <= 0:
            raise ConfigError(f"n must be positive, got {self.n}")


def test_overrides_are_typed_and_nested():
    cfg = apply_overrides(Outer(), ["n=5", "flag=true", "clip=0.5", "sizes=3,4,5", "inner.width=2", "name=b"])
    assert cfg == Outer(5, True, 0.5, (3, 4, 5), Inner(2.0, "b"))
    assert apply_overrides(cfg, ["clip=none"]).clip is None
    assert set_values(Outer(), n=9).n == 9
    assert config_keys(Outer()) == ["n", "flag", "clip", "sizes", "inner.width", "inner.name"]


@pytest.mark.parametrize("item,match", [("nope=1", "unknown --set key 'nope'"), ("n=abc", "n='abc' is not an integer"),
                                        ("flag=maybe", "not a boolean"), ("name=c", "not one of"),
                                        ("n", "KEY=VALUE"), ("n=-1", "n must be positive"),
                                        ("width=x", "not a number")])
def test_bad_overrides_name_the_problem(item, match):
    with pytest.raises(ConfigError, match=match):
        apply_overrides(Outer(), [item])


def test_parse_value_rejects_unsupported_types():
    with pytest.raises(ConfigError):
        parse_value("1", dict, "k")


def test_atomic_writes_leave_no_temporaries(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "hello")
    write_json(tmp_path / "b.json", {"x": float("nan"), "y": float("inf"), "p": tmp_path, "d": Inner()})
    write_csv(tmp_path / "c.csv", [{"a": 1, "b": 2}, {"a": 3, "c": 4}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json", "c.csv"]
    assert read_json(tmp_path / "b.json") == {"x": None, "y": "inf", "p": str(tmp_path),
                                              "d": {"width": 1.0, "name": "a"}}
    assert (tmp_path / "c.csv").read_text().splitlines() == ["a,b,c", "1,2,", "3,,4"]


def test_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "m.json"
    write_json(path, {"ok": 1})

    class Boom:
        def tolist(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_json(path, {"bad": Boom()})
    assert json.loads(path.read_text()) == {"ok": 1}


def test_run_dir_rules(tmp_path):
    out = prepare_run_dir(tmp_path / "run", force=False)
    mean = write_metrics(out, {0: {"a": 1.0, "b": [1.0, 2.0], "n": "x"}, 1: {"a": 3.0, "b": [3.0, 2.0], "n": "y"}},
                         reductions={"a": max})
    assert mean == {"a": 3.0, "b": [2.0, 2.0], "n": "x"}
    written = read_json(out / "metrics.json")
    assert written["mean"] == mean and written["std"]["b"] == pytest.approx([2 ** 0.5, 0.0])
    assert written["std"]["a"] == pytest.approx(2 ** 0.5) and written["seeds"]["1"]["n"] == "y"
    with pytest.raises(RunDirectoryError, match="finished run"):
        prepare_run_dir(out, force=False)
    prepare_run_dir(out, force=True)
    assert not (out / "metrics.json").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirectoryError, match="not a directory"):
        prepare_run_dir(tmp_path / "file", force=False)


def test_a_marked_block_is_replaced_between_its_markers_and_only_in_order(tmp_path):
    from icl_gd.core.results import marked_block_span, replace_marked_block

    path = tmp_path / "README.md"
    path.write_text("head\n<!-- a -->\nold\n<!-- b -->\ntail <!-- b -->\n")
    replace_marked_block(path, "<!-- a -->", "<!-- b -->", "<!-- a -->new<!-- b -->")
    assert path.read_text() == "head\n<!-- a -->new<!-- b -->\ntail <!-- b -->\n"  # the first end after start
    path.write_text("<!-- b -->\nbody\n<!-- a -->\n")  # end before start: not a block
    with pytest.raises(ConfigError, match=r"--flag .*README.md: no markers"):
        marked_block_span(path, "<!-- a -->", "<!-- b -->", "--flag")
    with pytest.raises(ConfigError, match="no such file"):
        marked_block_span(tmp_path / "absent.md", "<!-- a -->", "<!-- b -->")
