"""``runtime.files.staged_into``: a set of files moves in whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.files import staged_into


def test_items_move_in_and_a_folder_item_replaces_its_namesake(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "recipe").mkdir(parents=True)
    (out / "recipe" / "old.sh").write_text("old")
    (out / "keep.txt").write_text("kept")
    with staged_into(out) as staging:
        assert staging.parent == out and not (out / "a.csv").exists()
        (staging / "a.csv").write_text("a")
        (staging / "recipe").mkdir()
        (staging / "recipe" / "new.sh").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["a.csv", "keep.txt", "recipe"]
    assert [p.name for p in (out / "recipe").iterdir()] == ["new.sh"]


def test_a_failing_block_moves_nothing_and_leaves_no_staging(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.csv").write_text("before")
    with pytest.raises(RuntimeError), staged_into(out) as staging:
        (staging / "a.csv").write_text("after")
        raise RuntimeError("half-way")
    assert [p.name for p in out.iterdir()] == ["a.csv"] and (out / "a.csv").read_text() == "before"


def test_beside_makes_the_folder_only_at_the_end(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    with pytest.raises(RuntimeError), staged_into(out, beside=True) as staging:
        assert staging.parent == out.parent and not out.exists()
        raise RuntimeError("half-way")
    assert not out.exists() and not list(out.parent.iterdir())
    with staged_into(out, beside=True) as staging:
        (staging / "summary.json").write_text("{}")
    assert [p.name for p in out.iterdir()] == ["summary.json"] and list(out.parent.iterdir()) == [out]
