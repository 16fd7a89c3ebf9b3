"""Where a field sits in a YAML file: the line numbers that scenario and gate errors print."""
from __future__ import annotations

import yaml


def line_of(node: yaml.Node | None, path: tuple | list) -> int | None:
    """Walk a composed YAML node along a field path (keys and list indexes); the deepest line found."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line
