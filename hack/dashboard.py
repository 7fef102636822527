#!/usr/bin/env python3
"""Writes the chart's Grafana dashboard (files/dashboard.json, git-ignored).

Grafana's JSON repeats the same panel settings on every panel; here each panel
is its title, size and queries, so a new metric's panel is a line or two.
hack/release.sh and hack/chart-test.sh write it into the chart they package
or test; tests/prometheus.rs runs every query against a real Prometheus and
hack/metrics-doc.py --dashboard checks names and layout.

  hack/dashboard.py [FILE]   default: charts/winpool/files/dashboard.json
"""
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "charts" / "winpool" / "files" / "dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
OPERATOR = 'cluster=~"$cluster", job=~"$job"'
POOL = OPERATOR + ', pool=~"$pool"'


def m(name, extra=""):
    """A per-pool series of the selected cluster, job and pools."""
    return f"{name}{{{POOL}{extra}}}"


def op(name):
    """An operator-wide series of the selected cluster and job."""
    return f"{name}{{{OPERATOR}}}"


def thresholds(*steps):
    """Green from nothing, then (colour, from value) steps; a leading colour replaces green."""
    first = "green"
    if steps and steps[0][1] is None:
        first, steps = steps[0][0], steps[1:]
    return {"mode": "absolute", "steps": [{"color": first, "value": None}] + [{"color": c, "value": v} for c, v in steps]}


def targets(queries, **extra):
    """(expr, legend) pairs, refIds A, B, C..."""
    return [
        {"datasource": DATASOURCE, "expr": e, "legendFormat": legend, "refId": chr(ord("A") + i), **extra}
        for i, (e, legend) in enumerate(queries)
    ]


def panel(kind, title, description, size, defaults, options, queries, **rest):
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "size": size,
        "fieldConfig": {"defaults": defaults, "overrides": rest.pop("overrides", [])},
        "options": options,
        "targets": queries,
        **rest,
    }


def stat(title, description, expr, steps=()):
    defaults = {"unit": "short", "color": {"mode": "thresholds"}, "thresholds": thresholds(*steps)}
    options = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "background",
        "graphMode": "none",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
    }
    return panel("stat", title, description, (4, 4), defaults, options, targets([(expr, "__auto")]))


def ratio(title, description, expr):
    """A bar per pool, red to green as the share reaches 1."""
    defaults = {"unit": "percentunit", "min": 0, "max": 1, "color": {"mode": "thresholds"},
                "thresholds": thresholds(("red", None), ("yellow", 0.5), ("green", 1))}
    options = {
        "orientation": "horizontal",
        "displayMode": "gradient",
        "showUnfilled": True,
        "valueMode": "color",
        "namePlacement": "auto",
        "sizing": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
    }
    return panel("bargauge", title, description, (12, 8), defaults, options,
                 targets([(expr, "{{pool}}")], instant=True, range=False))


def graph(title, description, queries, unit="short", steps=(), size=(12, 8), stack=False, max_=None, legend="table"):
    """A time series; with threshold steps their lines and areas are drawn."""
    custom = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 25 if stack else 10,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        "thresholdsStyle": {"mode": "line+area" if steps else "off"},
    }
    defaults = {"unit": unit, "color": {"mode": "palette-classic"}, "custom": custom, "thresholds": thresholds(*steps), "min": 0}
    if max_ is not None:
        defaults["max"] = max_
    shown = {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"], "showLegend": True}
    if legend == "list":
        shown = {"displayMode": "list", "placement": "bottom", "calcs": [], "showLegend": True}
    options = {"legend": shown, "tooltip": {"mode": "multi", "sort": "desc"}}
    return panel("timeseries", title, description, size, defaults, options, targets(queries))


def quantiles(metric, by, window, labels, selector, qs):
    return [
        (f"histogram_quantile({q}, sum by ({by}) (rate({metric}{{{selector}}}[{window}])))", f"{labels}p{round(q * 100)}")
        for q in qs
    ]


def drain_blocked_table():
    defaults = {"unit": "short", "color": {"mode": "thresholds"},
                "custom": {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False},
                "thresholds": thresholds(("orange", 1))}
    overrides = [{"matcher": {"id": "byName", "options": "nodes"},
                  "properties": [{"id": "custom.cellOptions", "value": {"type": "color-text"}}]}]
    options = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"], "countRows": False, "fields": ""}}
    expr = f"max by (cluster, pool) ({m('winpool_pool_nodes_drain_blocked')})"
    transformations = [
        {"id": "filterByValue", "options": {"type": "include", "match": "any",
                                            "filters": [{"fieldName": "Value", "config": {"id": "greater", "options": {"value": 0}}}]}},
        {"id": "sortBy", "options": {"fields": {}, "sort": [{"field": "Value", "desc": True}]}},
        {"id": "organize", "options": {"excludeByName": {"Time": True}, "indexByName": {}, "renameByName": {"Value": "nodes"}}},
    ]
    return panel("table", "Pools with drain-blocked nodes",
                 "Pools with a node whose drain a PodDisruptionBudget blocks now, most first; empty when none is.",
                 (4, 8), defaults, options, targets([(expr, "{{pool}}")], instant=True, range=False, format="table"),
                 overrides=overrides, transformations=transformations)


FAILED = m("winpool_pool_nodes", ', state="Failed"')


def overview():
    return [
        stat("Pools", "WindowsNodePools the leader reports on.", f"count({m('winpool_pool_nodes_desired')})"),
        stat("Nodes desired", "Nodes in the selected pools; all should reach their pool's target revision.",
             f"sum({m('winpool_pool_nodes_desired')})"),
        stat("Nodes updated", "Nodes verified at their pool's target revision.", f"sum({m('winpool_pool_nodes_updated')})"),
        stat("Failed nodes", "Nodes whose rollout failed for the current revision (kubectl describe wnp <pool>).",
             f"sum({FAILED})", [("red", 1)]),
        stat("Rollouts in progress", "Pools with nodes being updated now.", f"sum({m('winpool_pool_rollout_in_progress')})",
             [("blue", 1)]),
        stat("Leaders", "Replicas holding the leader Lease; exactly 1 is healthy (0: nothing reconciles).",
             f"sum({op('winpool_leader')})", [("red", None), ("green", 1), ("red", 2)]),
    ]


def rollout():
    return [
        ratio("Rollout progress", "Updated / desired nodes per pool.",
              f"{m('winpool_pool_nodes_updated')} / ({m('winpool_pool_nodes_desired')} > 0)"),
        graph("Nodes by rollout state", "Pending, Draining, Applying, Verifying, Updated, Failed; stacked per pool.",
              [(f"sum by (pool, state) ({m('winpool_pool_nodes')})", "{{pool}} {{state}}")], stack=True),
        graph("Failed nodes", "Failed nodes per pool. Enough of them pause the rollout (rollout.maxFailedNodes).",
              [(f"sum without (state) ({FAILED})", "{{pool}}")], steps=[("red", 1)]),
        graph("Rollout in progress / paused / outside windows / gated",
              "1 while a pool's nodes are being updated; paused by reason (spec: spec.rollout.paused, "
              "annotation: winpool.dev/paused, failures: failure limit reached).",
              [(m("winpool_pool_rollout_in_progress"), "{{pool}} in progress"),
               (f"{m('winpool_pool_rollout_paused')} == 1", "{{pool}} paused ({{reason}})"),
               (f"1 - {m('winpool_pool_window_open')}", "{{pool}} outside its maintenance windows"),
               (m("winpool_pool_health_gate_closed"), "{{pool}} held by a health gate")], max_=1),
        graph("Node update duration",
              "Time from a node's start (drain) to Updated, per pool: quantiles of the nodes updated in the hour before "
              "each point (winpool_node_update_duration_seconds). Empty for a pool no node of which was updated in that "
              "hour. The pool status's averageNodeUpdateSeconds is the moving average the completion estimate uses.",
              quantiles("winpool_node_update_duration_seconds_bucket", "pool, le", "1h", "{{pool}} ", POOL, (0.5, 0.9)), unit="s"),
        graph("Drain-blocked nodes",
              "Nodes whose drain a PodDisruptionBudget blocks, per pool (Draining, or put back to be tried again). The "
              "pool's status.drainBlockedNodes names each node and its budget; WindowsNodePoolDrainBlocked fires after 30m.",
              [(m("winpool_pool_nodes_drain_blocked"), "{{pool}}")], steps=[("orange", 1)], size=(8, 8), legend="list"),
        drain_blocked_table(),
    ]


def patches():
    return [
        ratio("Patch compliance", "Share of each pool's nodes at or above its patchLevel.",
              f"clamp_min(1 - {m('winpool_pool_nodes_behind_patch_level')} / ({m('winpool_pool_nodes_desired')} > 0), 0)"),
        graph("Nodes behind patch level", "Nodes whose kubelet-reported build is below the pool's patchLevel.",
              [(m("winpool_pool_nodes_behind_patch_level"), "{{pool}}")], steps=[("orange", 1)]),
        graph("Nodes past their patch deadline",
              "Nodes below the pool's patchLevel after its compliance.deadline passed (condition PatchOverdue); "
              "kubectl winpool compliance <pool> names them and the days each is behind.",
              [(m("winpool_pool_nodes_patch_overdue"), "{{pool}}")], steps=[("red", 1)]),
    ]


def hns():
    return [
        graph("HNS utilisation",
              "Expected HNS load balancers per node / the pool's limit. Above 0.8 is near the limit; above 1 nodes risk HNS failures.",
              [(m("winpool_pool_hns_utilization_ratio"), "{{pool}}")], unit="percentunit", steps=[("orange", 0.8), ("red", 1)]),
        graph("HNS load balancers: expected vs limit",
              "Expected load balancers per node (from Services and EndpointSlices) against the pool's limit.",
              [(m("winpool_pool_hns_expected_load_balancers"), "{{pool}} expected"),
               (m("winpool_pool_hns_limit_load_balancers"), "{{pool}} limit")]),
        graph("Nodes not HNS-ready, drifted, and repairs that failed",
              "Nodes of each pool whose HNS is not ready (tainted until it is), of those the ones whose HNS lost what it "
              "held in this boot (WindowsHNSReady reason Collapsed or Drifted: restart kube-proxy or reboot), and the "
              "kube-proxy restarts hns.repair asked that did not happen (Failed, Unsupported) or are not answered yet (Asked).",
              [(m("winpool_pool_nodes_hns_not_ready"), "{{pool}}"),
               (m("winpool_pool_nodes_hns_drifted"), "{{pool}} drifted (Collapsed/Drifted)"),
               (m("winpool_pool_nodes_hns_repair", ', state!="Restarted"'), "{{pool}} kube-proxy restart {{state}}")],
              steps=[("red", 1)], size=(12, 6)),
        graph("HNS programming backlog vs pacing budget",
              "winpool's estimate of how long a node of each pool's Windows Server release needs to program the Service "
              "and EndpointSlice changes heard so far (published pace), and rollout.hnsPacing.budget: rollouts wait while "
              "the backlog is over it.",
              [(m("winpool_pool_hns_programming_backlog_seconds"), "{{pool}} backlog"),
               (m("winpool_pool_hns_pacing_budget_seconds"), "{{pool}} budget")],
              unit="s", steps=[("red", 1)], size=(12, 6)),
    ]


def operator():
    return [
        graph("Reconcile latency", "Time one pool reconcile takes, observe to act (quantiles over 5m).",
              quantiles("winpool_reconcile_duration_seconds_bucket", "le", "5m", "", OPERATOR, (0.5, 0.9, 0.99)), unit="s"),
        graph("Reconcile errors", "Failed reconciles per second by reason.",
              [(f"sum by (reason) (rate({op('winpool_reconcile_errors_total')}[5m]))", "{{reason}}")], unit="ops"),
        graph("Kubernetes API requests", "Requests winpool makes, per second, by verb, resource and outcome.",
              [(f"sum by (verb, resource, outcome) (rate({op('winpool_kube_api_requests_total')}[5m]))",
                "{{verb}} {{resource}} {{outcome}}")], unit="reqps"),
        graph("Leader", "1 for the replica that holds the Lease and writes.", [(op("winpool_leader"), "{{instance}}")], max_=1),
    ]


ROWS = [("Overview", overview), ("Rollout progress", rollout), ("Patch compliance", patches), ("HNS", hns), ("Operator", operator)]


def layout():
    """Rows across the full width; their panels left to right, wrapping at 24 columns."""
    panels, y, next_id = [], 0, 1
    for title, members in ROWS:
        panels.append({"type": "row", "title": title, "id": next_id, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id, y, x, line = next_id + 1, y + 1, 0, 0
        for p in members():
            w, h = p.pop("size")
            if x + w > 24:
                x, y, line = 0, y + line, 0
            p["id"], p["gridPos"] = next_id, {"h": h, "w": w, "x": x, "y": y}
            next_id, x, line = next_id + 1, x + w, max(line, h)
            panels.append(p)
        y += line
    return panels


def variable(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE, "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
            "current": {}, "hide": 0, "includeAll": True, "allValue": ".*", "multi": True, "options": [],
            "refresh": 2, "regex": "", "sort": 1}


def dashboard():
    return {
        "__inputs": [],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
                                  "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
                                  "type": "dashboard"}]},
        "description": "winpool: Windows node pool rollouts, patch compliance, HNS capacity and operator health.",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "links": [],
        "liveNow": False,
        "panels": layout(),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["winpool", "windows", "kubernetes"],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {},
             "hide": 0, "refresh": 1, "regex": "", "includeAll": False, "multi": False, "options": []},
            variable("cluster", "Cluster", "label_values(winpool_leader, cluster)"),
            variable("job", "Job", 'label_values(winpool_leader{cluster=~"$cluster"}, job)'),
            variable("pool", "Pool", f'label_values(winpool_pool_nodes_desired{{{OPERATOR}}}, pool)'),
        ]},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "winpool",
        "uid": "winpool-overview",
        "version": 1,
        "weekStart": "",
    }


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
