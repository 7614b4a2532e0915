"""Implementation modes: the built-in table and the advisory suggestion."""

from __future__ import annotations

import pytest

from guardkit_state.config import BUILTIN_MODES, ImplementationMode, default_config, suggest_mode


def test_builtin_modes_equal_seed_table() -> None:
    rows = [(m.mode, m.complexity_range, m.ceremony_level, m.invocation_method) for m in BUILTIN_MODES.values()]
    assert rows == [("direct", (1, 3), "minimal", "inline"), ("task_work", (3, 7), "standard", "sdk_query"),
                    ("autobuild", (5, 10), "full", "orchestrated")]
    assert BUILTIN_MODES["task_work"].pitfalls[0] == "MUST use SDK query(), NOT subprocess (ADR-FB-001)"
    assert BUILTIN_MODES["autobuild"].pitfalls == ("Requires feature-plan output",
                                                   "Don't mix with manual edits during execution")
    assert BUILTIN_MODES["direct"].when_to_use == ("Simple file ops", "Config changes", "Doc updates")
    assert [m.entity_id for m in BUILTIN_MODES.values()] == ["MODE-direct", "MODE-task_work", "MODE-autobuild"]


def test_simple_task_suggests_direct() -> None:
    advice = suggest_mode(2)
    assert advice is not None
    assert advice.mode.mode == "direct"
    assert advice.alternatives == ()
    assert advice.render().splitlines()[0] == "Suggested mode: direct (minimal ceremony)"


def test_complex_feature_suggests_autobuild() -> None:
    advice = default_config().suggest_mode(7)
    assert advice is not None
    assert advice.mode.mode == "autobuild"
    assert advice.alternatives == ("task_work",)  # 7 is in both ranges; autobuild's centre is nearer
    assert "centred nearest" in advice.reason


@pytest.mark.parametrize(
    ("complexity", "mode"),
    [(1, "direct"), (2, "direct"), (3, "direct"), (4, "task_work"), (5, "task_work"), (6, "task_work"),
     (7, "autobuild"), (8, "autobuild"), (10, "autobuild")],
)
def test_overlapping_ranges_resolve_to_nearest_centre(complexity: int, mode: str) -> None:
    advice = suggest_mode(complexity)
    assert advice is not None and advice.mode.mode == mode


def test_exact_tie_goes_to_less_ceremony() -> None:
    light = ImplementationMode("light", "inline", "", "", ("a",), (), (1, 5), "minimal")
    heavy = ImplementationMode("heavy", "orchestrated", "", "", ("b",), (), (1, 5), "full")
    advice = suggest_mode(3, [heavy, light])
    assert advice is not None
    assert (advice.mode.mode, advice.alternatives) == ("light", ("heavy",))
    assert "tie goes to less ceremony" in advice.reason


@pytest.mark.parametrize("complexity", [None, 0, -1, True, "5"])
def test_no_suggestion_without_an_estimate(complexity: object) -> None:
    assert suggest_mode(complexity) is None  # type: ignore[arg-type]


def test_complexity_above_ten_is_treated_as_ten() -> None:
    advice = suggest_mode(12)
    assert advice is not None
    assert (advice.mode.mode, advice.complexity) == ("autobuild", 10)
    assert advice.notes and "above 10" in advice.notes[0]


def test_advice_to_dict_is_marked_advisory() -> None:
    advice = suggest_mode(5)
    assert advice is not None
    data = advice.to_dict()
    assert data["advisory"] is True
    assert (data["suggested_mode"], data["alternatives"]) == ("task_work", ["autobuild"])
