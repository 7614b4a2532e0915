"""The rendering's fast path writes ``key: value`` lines itself; the C dumper writes a key over 128
characters as an explicit ``? key`` entry, and libyaml reads a plain key only up to 1024 characters."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from guardkit_state.taskfile.splice.render import render_yaml
from guardkit_state.taskfile.strict_yaml import parse_yaml


def _dumped(data: Any) -> str:
    return str(yaml.dump(data, Dumper=yaml.CSafeDumper, allow_unicode=True, sort_keys=False,
                         default_flow_style=False, width=-1))


@pytest.mark.parametrize("length", [128, 129, 1024, 1100])
@pytest.mark.parametrize("as_list", [False, True])
def test_a_long_key_renders_as_the_dumper_writes_it_and_reads_back(length: int, as_list: bool) -> None:
    entry = {"turn": 1, "k" * length: "feedback text"}
    data: Any = [entry] if as_list else entry
    rendered = render_yaml(data)
    assert rendered == _dumped(data)
    assert parse_yaml(rendered).data == data
