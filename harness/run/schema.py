"""The scenario file's JSON Schema, generated from the pydantic models that load it, so an editor
validates and completes scenario files by the same rules as `pschaos run` (`pschaos schema`).

Beyond what pydantic says of the models: fault kinds as an enum with each kind's params typed
(required ones required, defaults given, nothing else allowed), checks as an enum, targets
described with their selector grammar. What only code can check (a target that fits a kind, a
check that applies to the system) stays with the loader and `pschaos lint`.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any

from pschaos.netfaults.faults import LINK_FAULTS
from pschaos.netfaults.faults.base import REQUIRED, ToxicFault

from pschaos.harness.faults.registry import PROCESS
from pschaos.harness.run.scenario import CHECKS, Scenario

SCHEMA_ID = "https://pschaos.dev/schema/scenario-1.json"
JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}
TARGET_HELP = ("A process: a name (shard-0/1, worker-2, etcd), or a selector resolved at fault time: "
               "primary(shard=0), replica(shard=any), replicas(shard=0), shard(1), worker(any), nodes, workers. "
               "A link fault's target is a link: 'A -> B' (one way) or 'A <-> B' (both), e.g. "
               "'workers -> primary(shard=0)'.")


def kind_params(kind: str) -> tuple[dict[str, tuple[type, Any]], str]:
    """A fault kind's params spec and the first line of its class's docstring."""
    if kind in PROCESS:
        cls = PROCESS[kind]
        spec = dict(cls.params_spec)
    else:
        cls = LINK_FAULTS[kind]
        spec = {**cls.params_spec, **(ToxicFault.common if issubclass(cls, ToxicFault) else {})}
    doc = inspect.getdoc(cls) or inspect.getdoc(sys.modules[cls.__module__]) or ""
    return spec, " ".join(doc.strip().split("\n\n")[0].split())


def params_schema(spec: dict[str, tuple[type, Any]]) -> dict:
    props = {}
    for name, (typ, default) in spec.items():
        p: dict[str, Any] = {"type": JSON_TYPES.get(typ, "string")}
        if typ in (int, float):
            p["minimum"] = 0
        if default is not REQUIRED:
            p["default"] = default
        props[name] = p
    required = [n for n, (_, d) in spec.items() if d is REQUIRED]
    return {"type": "object", "properties": props, "additionalProperties": False,
            **({"required": required} if required else {})}


def scenario_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    s = Scenario.model_json_schema()
    s.pop("title", None)
    s["properties"].pop("path", None)          # where a scenario was read from: the loader's, not the file's
    s = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, "title": "pschaos scenario",
         "description": "A pschaos scenario: the cluster, the workload, the fault schedule and the expectations.", **s}
    defs = s["$defs"]
    fault = defs["Fault"]
    kinds = sorted(PROCESS) + sorted(LINK_FAULTS)
    fault["properties"]["kind"] = {"type": "string", "enum": kinds, "description": "the fault kind"}
    fault["properties"]["target"].update(description=TARGET_HELP)
    fault["properties"]["params"] = {"type": "object", "description": "the kind's parameters (see each kind)"}
    rules = []
    for k in kinds:
        spec, doc = kind_params(k)
        then: dict[str, Any] = {"properties": {"params": {**params_schema(spec), "description": f"{k}: {doc}"}}}
        if any(d is REQUIRED for _, d in spec.values()):
            then["required"] = ["params"]          # a kind with a required param needs the params block
        rules.append({"if": {"properties": {"kind": {"const": k}}, "required": ["kind"]}, "then": then})
    fault["allOf"] = rules
    checks = defs["Expect"]["properties"]["checks"]
    checks["items"] = {"type": "string", "enum": list(CHECKS)}
    exclude = defs["Expect"]["properties"]["exclude"]
    exclude.update(propertyNames={"enum": list(CHECKS)}, additionalProperties={"type": "string", "minLength": 8},
                   description="a default check not to run here, with the reason the report prints")
    checks["description"] = "checks to run beyond the defaults (every check that applies runs anyway)"
    return s
