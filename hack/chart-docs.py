#!/usr/bin/env python3
"""Generates charts/winpool/README.md and values.schema.json from
charts/winpool/values.yaml, the one source of the chart's values. The schema
is a build output (git-ignored): hack/release.sh writes it into the package.

values.yaml conventions:
  - the comment lines right above a key are its description;
  - a "# @schema {...}" line among them adds JSON Schema keywords to the key
    ({"type": null} removes the type taken from the default, for oneOf);
  - the type is otherwise the default's; a mapping with keys of its own is an
    object with exactly those properties (additionalProperties false).

  hack/chart-docs.py                write both into charts/winpool
  hack/chart-docs.py --check        exit 1 if README.md is stale (hack/chart-test.sh)
  hack/chart-docs.py --schema DIR   write only DIR/values.schema.json (hack/release.sh)
"""
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "winpool"
KEY = re.compile(r"^(\s*)([A-Za-z0-9_.\-/]+):(\s|$)")

# Kubernetes types the values hold, typed as far as a values file needs
# (the API server validates the rest when the Deployment is applied).
QUANTITY = {"oneOf": [{"type": "string", "pattern": r"^[0-9.]+([eE][-+]?[0-9]+|[KMGTPE]i?|[mkMGTPE])?$"}, {"type": "number"}]}
QUANTITIES = {"type": "object", "additionalProperties": QUANTITY}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": STRINGS, "matchExpressions": {"type": "array", "items": {"type": "object"}}},
}
SECCOMP = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"type": {"enum": ["RuntimeDefault", "Localhost", "Unconfined"]}, "localhostProfile": {"type": "string"}},
}
# Fields a pod's and a container's security context share.
RUN_AS = {
    "runAsNonRoot": {"type": "boolean"},
    "runAsUser": {"type": "integer", "minimum": 0},
    "runAsGroup": {"type": "integer", "minimum": 0},
    "seccompProfile": SECCOMP,
    "seLinuxOptions": {"type": "object"},
    "appArmorProfile": {"type": "object"},
}
DEFS = {
    "imagePullSecrets": {
        "type": "array",
        "items": {"type": "object", "additionalProperties": False, "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"]},
    },
    "resources": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"requests": QUANTITIES, "limits": QUANTITIES, "claims": {"type": "array", "items": {"type": "object"}}},
    },
    "podSecurityContext": {
        "type": "object",
        "additionalProperties": False,
        "properties": dict(
            RUN_AS,
            fsGroup={"type": "integer", "minimum": 0},
            fsGroupChangePolicy={"enum": ["OnRootMismatch", "Always"]},
            supplementalGroups={"type": "array", "items": {"type": "integer"}},
            sysctls={"type": "array", "items": {"type": "object"}},
        ),
    },
    "securityContext": {
        "type": "object",
        "additionalProperties": False,
        "properties": dict(
            RUN_AS,
            allowPrivilegeEscalation={"type": "boolean"},
            privileged={"type": "boolean"},
            readOnlyRootFilesystem={"type": "boolean"},
            capabilities={
                "type": "object",
                "additionalProperties": False,
                "properties": {"add": {"type": "array", "items": {"type": "string"}}, "drop": {"type": "array", "items": {"type": "string"}}},
            },
            procMount={"type": "string"},
        ),
    },
    "affinity": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"nodeAffinity": {"type": "object"}, "podAffinity": {"type": "object"}, "podAntiAffinity": {"type": "object"}},
    },
    "toleration": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "key": {"type": "string"},
            "operator": {"enum": ["Exists", "Equal"]},
            "value": {"type": "string"},
            "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute", ""]},
            "tolerationSeconds": {"type": "integer"},
        },
    },
    "topologySpreadConstraint": {
        "type": "object",
        "additionalProperties": False,
        "required": ["maxSkew", "topologyKey", "whenUnsatisfiable"],
        "properties": {
            "maxSkew": {"type": "integer", "minimum": 1},
            "topologyKey": {"type": "string", "minLength": 1},
            "whenUnsatisfiable": {"enum": ["DoNotSchedule", "ScheduleAnyway"]},
            "labelSelector": LABEL_SELECTOR,
            "minDomains": {"type": "integer", "minimum": 1},
            "matchLabelKeys": {"type": "array", "items": {"type": "string"}},
            "nodeAffinityPolicy": {"enum": ["Honor", "Ignore"]},
            "nodeTaintsPolicy": {"enum": ["Honor", "Ignore"]},
        },
    },
    "envVar": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}, "value": {"type": "string"}, "valueFrom": {"type": "object"}},
    },
}


def alert_names():
    rules = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def parse(text):
    """(path, description, schema keywords) of every key, in file order."""
    entries, stack, comments = [], [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped[1:].strip())
            continue
        if not stripped:
            comments = []
            continue
        m = KEY.match(line)
        if not m or stripped.startswith("- "):
            comments = []
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [k for _, k in stack] + [m.group(2)]
        stack.append((indent, m.group(2)))
        extra, desc = {}, []
        for c in comments:
            if c.startswith("@schema "):
                extra.update(json.loads(c[len("@schema ") :]))
            else:
                desc.append(c)
        entries.append((path, " ".join(desc).strip(), extra))
        comments = []
    return entries


def get(values, path):
    for k in path:
        values = values[k]
    return values


def type_of(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def schema(values, entries):
    root = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://winpool.dev/charts/winpool/values.schema.json",
        "title": "winpool chart values (generated from values.yaml by hack/chart-docs.py; do not edit)",
        "type": "object",
        "additionalProperties": False,
        "properties": {},
        "$defs": dict(DEFS, alertName={"enum": alert_names()}),
    }
    nodes = {(): root}
    children = {tuple(p[:-1]) for p, _, _ in entries if len(p) > 1}
    for path, desc, extra in entries:
        default = get(values, path)
        node = {}
        if "$ref" not in extra:
            node["type"] = type_of(default)
        if tuple(path) in children and "$ref" not in extra:
            node.update(additionalProperties=False, properties={})
        if desc:
            node["description"] = desc
        node.update(extra)
        if node.get("type", "") is None:
            del node["type"]
        parent = nodes[tuple(path[:-1])]
        parent.setdefault("properties", {})[path[-1]] = node
        nodes[tuple(path)] = node
    return root


def readme(values, entries):
    rows = []
    for path, desc, extra in entries:
        default = get(values, path)
        if isinstance(default, dict) and default and any(len(p) > len(path) and p[: len(path)] == path for p, _, _ in entries):
            if desc:
                desc = desc.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
                rows.append(f"| `{'.'.join(path)}` | | | {desc} |")
            continue
        kind = extra.get("$ref", "").rsplit("/", 1)[-1] or extra.get("type") or type_of(default)
        shown = json.dumps(default).replace("|", "\\|")
        desc = desc.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{'.'.join(path)}` | {kind} | `{shown}` | {desc} |")
    template = (CHART / "README.md.in").read_text()
    table = "| Key | Type | Default | Description |\n|---|---|---|---|\n" + "\n".join(rows)
    return template.replace("{{ VALUES_TABLE }}", table)


def undescribed(entries):
    """Keys without a description: every key a person may set needs one,
    except the entries of a map or of a well-known type ($ref), which the
    comment on the map itself describes."""
    typed = {tuple(p) for p, _, extra in entries if "$ref" in extra or isinstance(extra.get("additionalProperties"), dict)}
    inside = lambda p: any(tuple(p[:i]) in typed for i in range(1, len(p)))
    return [".".join(p) for p, desc, _ in entries if not desc and not inside(p)]


def main():
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    entries = parse(text)
    missing = undescribed(entries)
    if missing:
        print(f"values.yaml keys without a description (the comment above the key): {', '.join(missing)}", file=sys.stderr)
        sys.exit(1)
    args = sys.argv[1:]
    schema_text = json.dumps(schema(values, entries), indent=2) + "\n"
    if args[:1] == ["--schema"]:
        (Path(args[1]) / "values.schema.json").write_text(schema_text)
        return
    check = "--check" in args
    outputs = {CHART / "README.md": readme(values, entries)}
    if not check:
        outputs[CHART / "values.schema.json"] = schema_text
    stale = []
    for path, content in outputs.items():
        if check:
            if not path.exists() or path.read_text() != content:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(content)
    if stale:
        print(f"stale: {', '.join(stale)}; run hack/chart-docs.py", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
