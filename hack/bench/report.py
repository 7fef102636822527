"""Renders results.json (hack/bench/bench.py) into the benchmark table and docs/BENCHMARKS.md."""

import math
import os
import statistics
import sys
import time
from collections import defaultdict

# Issue 14's targets: a 1,000-node rollout, a whole 5,000-node rollout with
# 10,000 Services, winpool's writes per node updated, peak RSS at 5,000 nodes.
# The hns phase (issue 46): programming latency with pacing, and what pacing may cost the rollout.
TARGET_HNS_P99_S = 30
TARGET_HNS_MAKESPAN = 1.2
TARGET_ROLLOUT_RATIO = 1.10
TARGET_WHOLE_RATIO = 1.5
TARGET_WRITES = 4.0
# Node object writes by winpool and its agents together, per node updated
# (issue 30: every Node write goes to every Node watcher in the cluster).
TARGET_NODE_WRITES = 3.0
# An agent's report writes per node updated (issue 30): its preflight verdict, Applying, the result.
TARGET_REPORT_WRITES = 3.0
TARGET_RSS_MIB = 64.0
TARGET_STARTUP_S = 5.0
# CPU grows linearly when CPU(large)/CPU(small) ~ large/small: exponent 1. Quadratic is 2.
TARGET_CPU_EXPONENT = 1.25


def med(values):
    v = [x for x in values if x is not None]
    if not v:
        return None, None, None
    return statistics.median(v), min(v), max(v)


def num(x, digits=2):
    if x is None:
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def spread(values, digits=2, unit=""):
    m, lo, hi = med(values)
    if m is None:
        return "n/a"
    s = f"{num(m, digits)}{unit}"
    if len([x for x in values if x is not None]) > 1:
        s += f" ({num(lo, digits)}–{num(hi, digits)})"
    return s


def writes(audit):
    """An audit count's writes beyond evictions and Lease renewals (bench.py logs them per node too)."""
    return sum(v for k, v in audit["writes"].items() if "pods/eviction" not in k and " leases" not in k)


def writes_per_node(rec, audit="audit"):
    """writes() per node of the run's `audit` ("audit": winpool's; "agent_audit": the agents'); None for results
    from before the agents were counted."""
    if audit not in rec:
        return None
    return round(writes(rec[audit]) / rec["nodes"], 2)


def percentile(xs, q):
    """The nearest-rank q-quantile of xs (0 when empty)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else 0.0


def kind_per_node(rec, pred):
    """Writes per node of winpool and its agents together whose "<verb> <resource>" key pred accepts;
    None for results from before the agents were counted."""
    if "agent_audit" not in rec:
        return None
    total = sum(v for a in ("audit", "agent_audit") for k, v in rec[a]["writes"].items() if pred(k))
    return round(total / rec["nodes"], 2)


# Who is who in the audit log: the local control plane's components (kube-controller-manager,
# kube-scheduler, kwok), the simulated fleet's kubelets and this script's own polls all use kwokctl's
# admin credentials.
PARTIES = (
    ("system:serviceaccount:winpool-system:", "winpool"),
    ("system:serviceaccount:winpool-agents:", "agents"),
    ("kwok-admin", "kubelets (fleet), controllers, kwok, the benchmark's polls"),
)
READ_VERBS = ("get", "list", "watch")


def census_row(n, rs):
    """Every party's requests per node updated in a measured rollout (writes / reads), medians over runs."""
    per = defaultdict(lambda: ([], []))
    for r in rs:
        seen = defaultdict(lambda: [0, 0])
        for user, counts in (r.get("census") or {}).items():
            party = next((name for prefix, name in PARTIES if user.startswith(prefix)), None)
            if party is None:
                continue
            for key, c in counts.items():
                seen[party][1 if key.split(" ")[0] in READ_VERBS else 0] += c
        for party, (w, rd) in seen.items():
            per[party][0].append(w / r["nodes"])
            per[party][1].append(rd / r["nodes"])
    if not per:
        return None
    names = [name for _, name in PARTIES]
    cells = "; ".join(f"{party} {med(w)[0]:.2f} / {med(rd)[0]:.2f}"
                      for party, (w, rd) in sorted(per.items(), key=lambda kv: names.index(kv[0])))
    return ("  · every party's requests per node updated, writes / reads (audit log; a watch counts when it starts)",
            f"{n:,} nodes", cells, "—", "info")


def is_node_write(k):
    return k.split(" ")[-1] in ("nodes", "nodes/status")


def is_report_write(k):
    # The agent creates its report, then writes its status (the subresource).
    return k.split(" ")[-1] in ("windowsnodereports", "windowsnodereports/status")


def fleet_row(n, rs):
    return ("Simulated fleet: `hack/sim.sh` (the real agent per node) CPU seconds / peak RSS (VmHWM since the fleet started), "
            "same runs (not the operator)", f"{n:,} nodes",
            f"{spread([r['sim_cpu_s'] for r in rs], 1, ' s')} / {spread([r.get('sim_hwm_mib') for r in rs], 0, ' MiB')}", "—", "info")


def hns_rows(results, rows, verdicts):
    """The hns phase (issue 46): per release, the fleet's network-programming latency and the makespan of one
    rollout with rollout.hnsPacing off and one with it on."""
    by_release = {}
    for r in results.get("hns", []):
        by_release.setdefault(r["release"], {})["on" if r["pacing"] else "off"] = r
    for release, pair in sorted(by_release.items()):
        off, on = pair.get("off"), pair.get("on")
        if not off or not on:
            continue
        size = f"{on['nodes']:,} nodes, {on['services']:,} Services, {on['pods_per_node']} pods/node, maxUnavailable {on['max_unavailable']}"

        def lat(r):
            x = r["latency"]
            return f"{x['p50Ms'] / 1000:.1f} / {x['p99Ms'] / 1000:.1f} / {x['maxMs'] / 1000:.1f} s"

        ok = on["latency"]["p99Ms"] <= TARGET_HNS_P99_S * 1000
        verdicts[f"hns {release}"] = ok
        rows.append((f"HNS programming latency p50 / p99 / max ({release} pace, the fleet's measure), rollout.hnsPacing off → on",
                     size, f"{lat(off)} → {lat(on)}", f"p99 ≤ {TARGET_HNS_P99_S} s with pacing", verdict(ok)))
        ratio = on["makespan_s"] / off["makespan_s"] if off["makespan_s"] else 0
        ok = ratio <= TARGET_HNS_MAKESPAN
        verdicts[f"hns {release} makespan"] = ok
        rows.append((f"  · rollout makespan ({release}), pacing off → on", size,
                     f"{off['makespan_s']:.0f} s → {on['makespan_s']:.0f} s (×{ratio:.2f})", f"≤ ×{TARGET_HNS_MAKESPAN}", verdict(ok)))


def staging_rows(results, rows, verdicts):
    """The staging phase (issue 47): each node's time out of service (cordon → uncordon), median and p95, with
    rollout.staging Disabled and Enabled, on a fleet whose download takes as long as its install."""
    by_mode = {r["mode"]: r for r in results.get("staging", [])}
    off, on = by_mode.get("Disabled"), by_mode.get("Enabled")
    if not off or not on:
        return

    def q(r, p):
        return percentile(r["out_of_service_s"], p)

    size = (f"{on['nodes']:,} nodes, maxUnavailable {on['max_unavailable']}, download {on['download_s']:g} s, "
            f"install {on['apply_s']:g} s, reboot {on['reboot_s']:g} s")
    # Staged, the download is off the critical path: most of it should leave the time out of service.
    ok = q(on, 0.5) <= q(off, 0.5) - 0.8 * on["download_s"]
    verdicts["staging"] = ok
    rows.append(("Time out of service per node (cordon → uncordon), median / p95, rollout.staging Disabled → Enabled", size,
                 f"{q(off, 0.5):.1f} / {q(off, 0.95):.1f} s → {q(on, 0.5):.1f} / {q(on, 0.95):.1f} s",
                 "median less by ≥ 0.8 × the download", verdict(ok)))


def hotpatch_rows(results, rows, verdicts):
    """The hotpatch phase (issue 47): a simulated year, evictions and reboots per node with rollout.hotpatch
    Disabled and Enabled."""
    by_mode = {r["mode"]: r for r in results.get("hotpatch", [])}
    off, on = by_mode.get("Disabled"), by_mode.get("Enabled")
    if not off or not on:
        return
    n = on["nodes"]
    size = f"{n:,} nodes (Windows Server 2025, enrolled), {on['pods_per_node']} pods/node, 12 months, 4 baselines"
    # Windows decides the reboots (enrolled, a hotpatch needs none, drained or not); winpool decides the drains:
    # only the 4 baseline months of 12 should evict.
    ok = on["evictions"] <= off["evictions"] / 2
    verdicts["hotpatch"] = ok
    rows.append(("A year of monthly updates per node: reboots / evictions, rollout.hotpatch Disabled → Enabled", size,
                 f"{off['reboots'] / n:.1f} / {off['evictions'] / n:.1f} → {on['reboots'] / n:.1f} / {on['evictions'] / n:.1f}",
                 "evictions ≤ ½ (drains in the 4 baselines only)", verdict(ok)))


def compliance_rows(results, rows, verdicts):
    """The compliance phase (issue 68): kubectl winpool compliance over a year of records, and their size."""
    for c in results.get("compliance", []):
        ok = c["compliance_seconds"] < 10
        verdicts["compliance"] = ok
        size = f"{c['compliance_nodes']:,.0f} nodes × 13 records ({c['compliance_records']:,.0f})"
        rows.append(("kubectl winpool compliance --cve: seconds to answer once the records are read", size,
                     f"{c['compliance_seconds']:.2f} s", "< 10 s", verdict(ok)))
        rows.append(("One ended operation's bytes as JSON (etcd keeps about this, plus its managedFields), a node's year",
                     "13 records", f"{c['record_bytes']:,.0f} B, {c['record_bytes_per_node_year']:,.0f} B", "recorded", "—"))


def verdict(ok):
    return "**met**" if ok else "**missed**"


def build(results):
    cfg = results["config"]
    runs = results["runs"]
    n_runs = cfg["runs"]

    def sel(phase, n, kind="measured"):
        return [r for r in runs if r["phase"] == phase and r["nodes"] == n and r["kind"] == kind]

    rows = []  # (measure, size, result, target, verdict)
    rsizes = cfg["rollout_sizes"]
    fsizes = cfg["footprint_sizes"]
    big_r = max(rsizes) if rsizes else None
    big_f = max(fsizes) if fsizes else None
    small_f = min(fsizes) if fsizes else None
    svc_note = f"{results['setup'].get('services', cfg['services']):,} Services / {results['setup'].get('endpoints', cfg['endpoints']):,} endpoints"
    verdicts = {}

    # Rollout efficiency.
    for n in rsizes:
        rs = sel("rollout", n)
        if not rs:
            continue
        ratio = med([r["ratio"] for r in rs])[0]
        res = f"{spread([r['ratio'] for r in rs])} — {spread([r['actual_s'] for r in rs], 1)} s vs ideal {rs[0]['ideal_s']:.0f} s"
        if n == big_r:
            ok = ratio <= TARGET_ROLLOUT_RATIO
            verdicts["rollout"] = ok
            rows.append(("Rollout time, actual ÷ ideal (pool write → status all updated)", f"{n:,} nodes", res, f"≤ {TARGET_ROLLOUT_RATIO:.2f}", verdict(ok)))
        else:
            rows.append(("Rollout time, actual ÷ ideal (pool write → status all updated)", f"{n:,} nodes", res, "—", "info"))
        # Where a node's time in flight goes, so a reader sees which part is winpool's.
        prof = [r.get("profile", {}) for r in rs]
        sim_s = cfg["apply_seconds"] + cfg["reboot_seconds"]
        own = [p["drain_round"] + p["verify"] for p in prof if "drain_round" in p and "verify" in p]
        agent = [p["agent_overhead"] for p in prof if "agent_overhead" in p]
        cpu = [(sum(r["cp_cpu_s"].values()), r["operator_cpu_s"], r.get("machine_busy_s")) for r in rs]
        if own and agent:
            busy = [b / (r["actual_s"] * results["machine"]["nproc"]) for (_, _, b), r in zip(cpu, rs) if b]
            rows.append(("  · a node's time in flight (medians): simulated apply + reboot / the agent's own round trips and the "
                         "simulated reboot's kubelet writes (a node's first rollout in a pool: also Kubernetes starting its agent pod) "
                         "/ winpool's own rounds (cordon → drained → labelled, report → verified); machine CPU busy; "
                         "control plane vs winpool CPU s",
                         f"{n:,} nodes",
                         f"{sim_s:g} s / {med(agent)[0]:.2f} s / {med(own)[0]:.2f} s; "
                         f"{med(busy)[0]:.0%} busy; {med([c for c, _, _ in cpu])[0]:.0f} s vs {med([o for _, o, _ in cpu])[0]:.1f} s"
                         if busy else f"{sim_s:g} s / {med(agent)[0]:.2f} s / {med(own)[0]:.2f} s", "—", "info"))
        rest = [(r["apiserver_rest_cpu_per_s"], r) for r in rs if r.get("apiserver_rest_cpu_per_s") is not None]
        if rest:
            floor = [x * r["actual_s"] for x, r in rest]
            total = [r["cp_cpu_s"].get("kube-apiserver", 0) for _, r in rest]
            rows.append(("  · kube-apiserver CPU s of a rollout: in all / the cluster at rest for as long (simulated kubelets' "
                         "heartbeats, controllers; measured for 20 s before the rollout) / the rest, what the rollout added",
                         f"{n:,} nodes",
                         f"{med(total)[0]:.1f} / {med(floor)[0]:.1f} ({med([x for x, _ in rest])[0]:.2f}/s) / "
                         f"{med([t - f for t, f in zip(total, floor)])[0]:.1f}", "—", "info"))
        census = census_row(n, rs)
        if census:
            rows.append(census)
        rows.append(fleet_row(n, rs))
    frac = cfg.get("fraction", 1.0)
    part = f"first {frac:.0%} of the nodes" if frac < 1 else "all nodes"
    for n in fsizes:
        rs = sel("footprint", n)
        if rs:
            rows.append((f"Time from operator start to {part} updated, with {svc_note}; actual ÷ ideal", f"{n:,} nodes",
                         f"{spread([r['actual_s'] for r in rs], 1)} s — {spread([r['ratio'] for r in rs])} of ideal {rs[0]['ideal_s']:.0f} s", "—", "info"))
    wholes = [r for r in runs if r["kind"] == "whole"]
    for r in wholes:
        ok = r["ratio"] <= TARGET_WHOLE_RATIO
        verdicts["whole"] = ok
        rows.append((f"Whole rollout with {svc_note} (one run), operator start → all updated; actual ÷ ideal", f"{r['nodes']:,} nodes",
                     f"{r['ratio']:.2f} — {r['actual_s']:.0f} s vs ideal {r['ideal_s']:.0f} s", f"≤ {TARGET_WHOLE_RATIO:.1f}", verdict(ok)))

    # API cost.
    wp_ok = True
    for phase, kind, sizes in (("rollout", "measured", rsizes), ("footprint", "whole", [r["nodes"] for r in wholes])):
        for n in sizes:
            rs = sel(phase, n, kind)
            if not rs:
                continue
            v = med([writes_per_node(r) for r in rs])[0]
            wp_ok &= v <= TARGET_WRITES
            where = "" if phase == "rollout" else f", whole rollout with {svc_note} (one run)"
            rows.append((f"winpool writes per node updated, beyond evictions and Lease renewals (audit log){where}", f"{n:,} nodes",
                         spread([writes_per_node(r) for r in rs]), f"≤ {TARGET_WRITES:.0f}", verdict(v <= TARGET_WRITES)))
            agents = [writes_per_node(r, "agent_audit") for r in rs]
            if any(a is not None for a in agents):
                rows.append((f"agent writes per node updated (the agents' ServiceAccount, audit log; not winpool's above){where}",
                             f"{n:,} nodes", spread(agents), "—", "info"))
                node_writes = [kind_per_node(r, is_node_write) for r in rs]
                ok = med(node_writes)[0] <= TARGET_NODE_WRITES
                wp_ok &= ok
                rows.append((f"Node object writes per node updated, winpool and agents together (patch nodes, nodes/status){where}",
                             f"{n:,} nodes", spread(node_writes), f"≤ {TARGET_NODE_WRITES:.0f}", verdict(ok)))
                report_writes = [kind_per_node(r, is_report_write) for r in rs]
                ok = med(report_writes)[0] <= TARGET_REPORT_WRITES
                wp_ok &= ok
                rows.append((f"agents' report writes (WindowsNodeReport create + status patch) per node updated{where}",
                             f"{n:,} nodes", spread(report_writes), f"≤ {TARGET_REPORT_WRITES:.0f}", verdict(ok)))
    verdicts["writes"] = wp_ok
    hns_rows(results, rows, verdicts)
    staging_rows(results, rows, verdicts)
    hotpatch_rows(results, rows, verdicts)
    compliance_rows(results, rows, verdicts)
    for c in results.get("churn", []):
        node_w = sum(v for a in (c["audit"], c["agent_audit"]) for k, v in a["writes"].items() if is_node_write(k))
        reports = sum(v for k, v in c["agent_audit"]["writes"].items() if is_report_write(k))
        verdicts["churn"] = node_w == 0
        every = f", agents reading HNS every {c['agent_hns_interval']}" if c.get("agent_hns_interval") else ", agents reading HNS every second"
        rows.append((f"Steady state, no rollout, a Service's endpoints changing every second ({c['changes']} changes in "
                     f"{c['seconds']:.0f} s{every}): Node writes by winpool and its agents", f"{c['nodes']:,} nodes", f"{node_w}", "0",
                     verdict(node_w == 0)))
        rows.append(("  · meanwhile: agents' report writes; nodes HNS-ready at the end (their counts reached winpool); "
                     "kube-apiserver / winpool CPU s", f"{c['nodes']:,} nodes",
                     f"{reports} ({reports / c['seconds']:.1f}/s); {c['hns_ready_at_end']:,} of {c['nodes']:,}; "
                     f"{c['cp_cpu_s'].get('kube-apiserver', 0):.0f} s / {c['operator_cpu_s']:.0f} s", "—", "info"))
    if big_r and sel("rollout", big_r):
        rs = sel("rollout", big_r)
        keys = sorted({k for r in rs for k in r["audit"]["writes"]})
        for k in keys:
            if " leases" in k:
                per_s = med([r["audit"]["writes"].get(k, 0) / r["actual_s"] for r in rs])[0]
                rows.append((f"  · {k} (leader election; per second, not per node)", f"{big_r:,} nodes", f"{per_s:.2f}/s", "—", "info"))
                continue
            vals = [r["audit"]["writes"].get(k, 0) / r["nodes"] for r in rs]
            rows.append((f"  · {k} per node", f"{big_r:,} nodes", spread(vals, 3), "—", "info"))
        if not any("pods/eviction" in k for k in keys):
            rows.append(("  · create pods/eviction per node", f"{big_r:,} nodes", "0 (the simulated nodes run no workload pods)", "—", "info"))
        for k in sorted({k for r in rs for k in r.get("agent_audit", {}).get("writes", {})}):
            vals = [r["agent_audit"]["writes"].get(k, 0) / r["nodes"] for r in rs if "agent_audit" in r]
            rows.append((f"  · agents: {k} per node", f"{big_r:,} nodes", spread(vals, 3), "—", "info"))
        lists = [sum(v for k, v in r["audit"]["lists_detail"].items() if not k.startswith("pods (fieldSelector")) for r in rs]
        pods = [r["audit"]["lists_detail"].get("pods (fieldSelector)", 0) / r["nodes"] for r in rs]
        watches = [sum(r["audit"]["watches"].values()) for r in rs]
        rows.append(("  · lists during a rollout other than drain's pod lists (a relist would show here)", f"{big_r:,} nodes",
                     spread(lists, 0), "0", verdict(max(lists) == 0)))
        rows.append(("  · watches (re)started during a rollout (the API server ends a watch after ~5 min; it resumes from its resourceVersion, no list)",
                     f"{big_r:,} nodes", spread(watches, 0), "—", "info"))
        rows.append(("  · drain's pod lists (fieldSelector spec.nodeName) per node", f"{big_r:,} nodes", spread(pods, 2), "—", "info"))
    relists_ok = True
    for lt in results.get("lifetimes", []):
        full = {k.split(" ")[0]: v for k, v in lt["audit"]["lists_detail"].items() if k.endswith("(full)") and not k.startswith("pods")}
        if "lists_after_detail" in lt["audit"]:
            later = {k.split(" ")[0]: v for k, v in lt["audit"]["lists_after_detail"].items() if k.endswith("(full)") and not k.startswith("pods")}
            relists = sum(later.values())
            basis = f"after its first {lt.get('startup_s', 10)} s"
        else:
            relists = sum(max(0, v - 1) for v in full.values())
            basis = "beyond the first per watcher"
        relists_ok &= relists == 0
        desc = ", ".join(f"{k} {v}" for k, v in sorted(full.items()))
        w = ", ".join(f"{k} {v}" for k, v in sorted(lt["audit"]["watches"].items()))
        rows.append((f"Full lists over one operator's life ({lt['seconds'] / 60:.1f} min, {1 + n_runs if results['config']['warmup'] else n_runs} rollouts); "
                     f"a list {basis} = a relist", f"{lt['nodes']:,} nodes",
                     f"{relists} relists (all lists: {desc}; watches, renewed about every 5 min: {w})", "0", verdict(relists == 0)))
    verdicts["relists"] = relists_ok

    # Footprint.
    for n in fsizes:
        rs = sel("footprint", n)
        if not rs:
            continue
        rss = med([r["operator_hwm_mib"] for r in rs])[0]
        whole_here = [r for r in wholes if r["nodes"] == n]
        if n == big_f and not whole_here:
            verdicts["rss"] = rss <= TARGET_RSS_MIB
            rows.append((f"winpool peak RSS (VmHWM), start-up + {part} updated, with {svc_note}", f"{n:,} nodes",
                         spread([r["operator_hwm_mib"] for r in rs], 1, " MiB"), f"≤ {TARGET_RSS_MIB:.0f} MiB", verdict(rss <= TARGET_RSS_MIB)))
        elif n == big_f:
            # The peak of a whole rollout is the one the target is about; the shorter runs give the spread.
            peak = max(rss, max(r["operator_hwm_mib"] for r in whole_here))
            verdicts["rss"] = peak <= TARGET_RSS_MIB
            rows.append((f"winpool peak RSS (VmHWM), start-up + {part} updated, with {svc_note}", f"{n:,} nodes",
                         spread([r["operator_hwm_mib"] for r in rs], 1, " MiB"), "—", "info"))
        else:
            rows.append((f"winpool peak RSS (VmHWM), start-up + {part} updated, with {svc_note}", f"{n:,} nodes",
                         spread([r["operator_hwm_mib"] for r in rs], 1, " MiB"), "—", "info"))
    for r in wholes:
        ok = r["operator_hwm_mib"] <= TARGET_RSS_MIB
        rows.append((f"winpool peak RSS (VmHWM) over a whole rollout (one run), with {svc_note}", f"{r['nodes']:,} nodes",
                     f"{r['operator_hwm_mib']:.1f} MiB", f"≤ {TARGET_RSS_MIB:.0f} MiB", verdict(ok) if r["nodes"] == big_f else "info"))
    for n in fsizes:
        rs = sel("footprint", n)
        if not rs:
            continue
        cpu = [r["operator_cpu_s"] for r in rs]
        per = [r["operator_cpu_s"] / r["nodes"] * 1000 for r in rs]
        res = f"{spread(cpu, 1, ' s')}; {spread(per, 1, ' ms')}/node"
        if n == big_f and small_f != big_f and sel("footprint", small_f):
            c_small = med([r["operator_cpu_s"] for r in sel("footprint", small_f)])[0]
            c_big = med(cpu)[0]
            k = math.log(c_big / c_small) / math.log(big_f / small_f) if c_small and c_big else None
            ok = k is not None and k <= TARGET_CPU_EXPONENT
            verdicts["cpu"] = ok
            res += f"; growth exponent {num(k)} from {small_f:,} to {big_f:,} nodes"
            rows.append((f"winpool CPU seconds (utime+stime), start-up + {part} updated", f"{n:,} nodes", res,
                         f"linear (exponent ≤ {TARGET_CPU_EXPONENT})", verdict(ok)))
        else:
            rows.append((f"winpool CPU seconds (utime+stime), start-up + {part} updated", f"{n:,} nodes", res, "—", "info"))
    for r in wholes:
        rows.append((f"winpool CPU seconds over a whole rollout (one run)", f"{r['nodes']:,} nodes",
                     f"{r['operator_cpu_s']:.1f} s; {r['operator_cpu_s'] / r['nodes'] * 1000:.1f} ms/node", "—", "info"))
    for n in fsizes:
        rs = sel("footprint", n)
        if not rs:
            continue
        st = med([r["startup_s"] for r in rs])[0]
        res = (f"{spread([r['startup_s'] for r in rs], 2, ' s')} (caches synced at {spread([r['synced_s'] for r in rs], 2, ' s')}; "
               f"first node cordoned at {spread([r['profile'].get('first_start_after_s') for r in rs], 2, ' s')})")
        if n == big_f:
            ok = st is not None and st <= TARGET_STARTUP_S
            verdicts["startup"] = ok
            rows.append(("Start-up: process start → first reconcile decision", f"{n:,} nodes", res, f"≤ {TARGET_STARTUP_S:.0f} s", verdict(ok)))
        else:
            rows.append(("Start-up: process start → first reconcile decision", f"{n:,} nodes", res, "—", "info"))
    # The control plane beside winpool, over the same runs.
    for n in fsizes:
        rs = sel("footprint", n)
        if not rs:
            continue
        for comp in ("kube-apiserver", "etcd"):
            rows.append((f"Control plane: {comp} CPU seconds / peak RSS, same runs", f"{n:,} nodes",
                         f"{spread([r['cp_cpu_s'][comp] for r in rs], 1, ' s')} / {spread([r['cp_peak_rss_mib'][comp] for r in rs], 0, ' MiB')}",
                         "—", "info"))
        others = [sum(r["cp_cpu_s"][c] for c in ("kube-controller-manager", "kube-scheduler", "kwok-controller")) for r in rs]
        rows.append(("Control plane: kube-controller-manager + kube-scheduler + kwok CPU seconds, same runs", f"{n:,} nodes", spread(others, 1, " s"), "—", "info"))
        rows.append(fleet_row(n, rs))
    for r in wholes:
        rows.append(("Control plane over the whole rollout: kube-apiserver / etcd CPU seconds; winpool's share", f"{r['nodes']:,} nodes",
                     f"{r['cp_cpu_s']['kube-apiserver']:.0f} s / {r['cp_cpu_s']['etcd']:.0f} s; winpool {r['operator_cpu_s']:.0f} s", "—", "info"))
    return rows, verdicts


def table(rows):
    out = ["| Measure | Size | Result: median (min–max) | Target | |", "|---|---|---|---|---|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


def details(results):
    cfg = results["config"]
    out = []
    out.append("### Every run\n")
    out.append("`reconcile busy` = time spent inside reconciles ÷ rollout time (one pool is reconciled by one task at a time); "
               "`write p50/p90` = API server latency of winpool's writes (audit log); `other load` = CPU seconds per second "
               "used on the machine by processes outside the benchmark (the machine is shared).\n")
    out.append("| phase | run | nodes | actual s | ideal s | ratio | writes/node | agent writes/node | reconciles (mean ms) | reconcile busy "
               "| write p50/p90 ms | winpool CPU s | winpool VmHWM MiB | start-up s | apiserver CPU s | fleet CPU s | fleet VmHWM MiB "
               "| other load |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results["runs"]:
        rc = r.get("reconciles") or 0
        mean_ms = (r.get("reconcile_seconds") or 0) / rc * 1000 if rc else 0
        lat = r["audit"].get("write_latency_ms", {})
        busy = (r.get("reconcile_seconds") or 0) / r["actual_s"] if r["actual_s"] else 0
        other = r.get("other_cpu_s")
        other = max(0.0, other) if other is not None else None  # /proc/stat and per-process ticks are read a moment apart
        whole = r.get("target", r["nodes"]) == r["nodes"]
        out.append(
            f"| {r['phase']} | {r['kind']}{'' if r['run'] is None else ' ' + str(r['run'] + 1)} | {r['nodes']:,} | {r['actual_s']:.1f} | {r['ideal_s']:.0f} | "
            f"{r['ratio']:.2f} | {writes_per_node(r) if whole else '—'} | {num(writes_per_node(r, 'agent_audit')) if whole else '—'} | "
            f"{rc} ({mean_ms:.0f}) | {busy:.0%} | {num(lat.get('p50'), 0)}/{num(lat.get('p90'), 0)} | "
            f"{r['operator_cpu_s']:.1f} | {r['operator_hwm_mib']:.1f} | "
            f"{num(r.get('startup_s'))} | {r['cp_cpu_s']['kube-apiserver']:.1f} | {num(r['sim_cpu_s'], 1)} | {num(r.get('sim_hwm_mib'), 1)} | "
            f"{num(other / r['actual_s'] if other is not None else None)} |"
        )
    out.append("")
    out.append("### Where a node's time goes (medians over the nodes of a run, then over runs)\n")
    out.append(f"Simulated work per node: apply {cfg['apply_seconds']:g} s + reboot {cfg['reboot_seconds']:g} s. "
               "`in_flight` = first winpool patch (cordon) → Updated; `drain_round` = cordon → agent revision label (one reconcile "
               "round later); `agent_overhead` = label → the agent's success report, minus the simulated work (the agent "
               "seeing the label, reading the revision's ConfigMap, reporting Applying, the fleet's kubelet "
               "writes across the reboot, the agent starting again; in a node's first rollout in a pool also its agent pod "
               "created, scheduled, started by kwok); `verify` = the agent's report → Updated; "
               "`slot_utilisation` = Σ in-flight time ÷ (maxUnavailable × rollout time); `first_start_after_s` = pool write "
               "(or operator start) → first cordon.\n")
    keys = ["in_flight", "drain_round", "agent_overhead", "verify", "slot_utilisation", "first_start_after_s"]
    out.append("| phase | nodes | " + " | ".join(keys) + " |")
    out.append("|---|---|" + "---|" * len(keys))
    groups = {}
    for r in results["runs"]:
        if r["kind"] in ("measured", "whole"):
            groups.setdefault((r["phase"] + (" (whole)" if r["kind"] == "whole" else ""), r["nodes"]), []).append(r)
    for (phase, n), rs in groups.items():
        vals = [num(med([r["profile"].get(k) for r in rs])[0]) for k in keys]
        out.append(f"| {phase} | {n:,} | " + " | ".join(vals) + " |")
    out.append("")
    firsts = [r for r in results["runs"] if r["kind"] == "first"]
    if firsts:
        out.append("### The first rollout of a new pool (warm-up; not in the medians)\n")
        out.append("Every node also joins the pool (label), gets its first `WindowsHNSReady` condition and an agent pod from the "
                   f"pool's new DaemonSet. Footprint runs stop at {cfg.get('fraction', 1.0):.0%} updated, so their writes are not "
                   "per node updated.\n")
        for r in firsts:
            w = ", ".join(f"{k} {v / r['nodes']:.2f}" for k, v in sorted(r["audit"]["writes"].items()))
            out.append(f"- {r['phase']}, {r['nodes']:,} nodes: {r['actual_s']:.1f} s (×{r['ratio']:.2f}), "
                       f"{writes_per_node(r):.2f} writes/node ({w})")
        out.append("")
    agents, agent_agents = {}, {}
    for r in results["runs"]:
        agents.update(r["audit"].get("user_agents", {}))
        agent_agents.update(r.get("agent_audit", {}).get("user_agents", {}))

    def user_agents(seen):
        return ", ".join(f"`{a}`" if a else "none" for a in sorted(seen))

    if agents:
        out.append("### Identity\n")
        text = ("The operator ran as the chart's ServiceAccount (`system:serviceaccount:winpool-system:winpool`, token from "
                "`kubectl create token`, RBAC rendered from `charts/winpool`); its requests were counted by that username "
                f"(user agents: {user_agents(agents)}).")
        if agent_agents:
            text += (" The simulated fleet's agents ran as `system:serviceaccount:winpool-agents:winpool-agent` "
                     "(`hack/agent-identity.sh`, from the chart), each with a token bound to its node's agent pod, and were "
                     f"counted apart by that username (user agents: {user_agents(agent_agents)}); the fleet plays the "
                     "kubelets (node status across a reboot) with the admin identity, counted for neither.")
        out.append(text + "\n")
    s = results.get("setup", {})
    out.append("### Run times\n")
    out.append(", ".join(f"{k} {v}" for k, v in s.items()) + "\n")
    return "\n".join(out)


ANALYSIS = "## Analysis"


def kept_analysis(out_path):
    """The hand-written analysis of the page being re-rendered: everything from its
    "## Analysis" heading on. It lives only there (one copy), so a render must carry it
    over rather than drop it; a page without one (a first render) gets none."""
    if not os.path.exists(out_path):
        return ""
    with open(out_path) as f:
        page = f.read()
    at = page.find("\n" + ANALYSIS + "\n")
    return page[at + 1:] if at >= 0 else ""


def write(results, out_path):
    rows, verdicts = build(results)
    m, v, cfg = results["machine"], results["versions"], results["config"]
    mode_note = {
        "full": "",
        "quick": "\n**Quick mode**: one run per size, no warm-up rollout; figures are single runs, not medians.\n",
        "smoke": "\n**Smoke mode** (the suite's rot check): tiny sizes, one run; the targets are not meaningful here.\n",
    }[results["mode"]]
    head = (
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}. "
        f"Kubernetes {v.get('kubernetes', '?')} (local control plane: etcd, kube-apiserver, kube-controller-manager, "
        f"kube-scheduler, kwok as processes on the same machine), winpool {v['winpool']} ({v.get('profile', 'release')} build), {v['rustc']}"
        f"{'; agents built with ' + v['go'] if v.get('go') else ''}. "
        f"Run {results.get('started_utc') or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cfg['runs']} measured run(s) per size"
        f"{' after one warm-up rollout' if cfg['warmup'] else ''}.\n"
    )
    qps = cfg.get("cp_api_qps")
    qps_note = (f"\nkube-controller-manager and kube-scheduler run with `--kube-api-qps {qps} --kube-api-burst {int(qps) * 2}` "
                "(`WINPOOL_CP_API_QPS`), as large clusters are tuned. It matters to a pool's first rollout, in which the "
                "DaemonSet controller creates an agent pod per node as winpool starts it; later rollouts create none.\n" if qps else
                "\nkube-controller-manager and kube-scheduler run with Kubernetes' default client QPS (20 and 50).\n")
    whole_note = ("; one more run at the largest size goes through a whole rollout (a single run: it takes long on this machine)"
                  if cfg.get("whole") else "")
    tbl = table(rows)
    print(tbl)
    summary = ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in verdicts.items())
    print(f"\ntargets: {summary}", file=sys.stderr)
    if not out_path:
        return
    analysis = kept_analysis(out_path) if results["mode"] != "smoke" else ""
    doc = f"""# Benchmarks

Generated by `hack/bench.sh` ({results['mode']} mode) down to "{ANALYSIS}"; the analysis from there on is written by
hand in this file, and a new render keeps it.
{mode_note}
{head}
Setup: `hack/sim.sh` (the real agent per node) plays the fleet: every simulated node runs the agent's own code
(`agent/`) against a fake host, authenticated with a token bound to that node's agent pod, while the fleet plays the
machine and the kubelet. An update installs in {cfg['apply_seconds']:g} s and asks for a reboot, which keeps the node
NotReady for {cfg['reboot_seconds']:g} s and gives it a new bootID; the hosts' HNS holds fixed counts above anything the
cluster needs, so HNS has caught up as soon as a node is back and the simulated time per node is
{cfg['apply_seconds'] + cfg['reboot_seconds']:g} s. The agent pods come from the pool's one agent DaemonSet and stay across
revisions. winpool labels a node into its pool when the pool first selects it; in the benchmark the pool and its
first rollout arrive together, so only that first (warm-up) rollout waits for Kubernetes to start the agent pods. Pools use `maxUnavailable: {cfg['max_unavailable']}`; ideal =
ceil(N ÷ maxUnavailable) × {cfg['apply_seconds'] + cfg['reboot_seconds']:g} s. The operator is the release binary, run with leader
election on, as the Helm chart's ServiceAccount with the chart's RBAC; its API requests are counted from the API
server's audit log (Metadata level) by that username, the agents' apart by theirs. Footprint runs add {results['setup'].get('services', cfg['services']):,}
selector-less Services with {results['setup'].get('endpoints', cfg['endpoints']):,} endpoints in hand-made EndpointSlices;
each run restarts the operator after raising the pool's patch level, so it covers start-up and the rollout until
{cfg.get('fraction', 1.0):.0%} of the nodes are updated (then the operator is stopped){whole_note}.
{qps_note}

{tbl}

{details(results)}
{analysis}"""
    with open(out_path, "w") as f:
        f.write(doc)
    print(f"wrote {out_path}", file=sys.stderr)
