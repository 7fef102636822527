#!/usr/bin/env python3
"""The scale benchmark behind hack/bench.sh (run that, not this).

Phases, each on a fresh local control plane of its own (never the tests'):

  rollout    N simulated nodes (100, 1,000), one operator process running under
             the chart's ServiceAccount; a warm-up rollout creates the pool
             (first rollout, reported but not in the medians), then each
             measured run raises the pool's patch level and times the pool
             from that write until its status reports every node updated.
  footprint  10,000 Services and 50,000 endpoints, then 1,000 and 5,000 nodes;
             per run the operator is stopped, the pool's patch level raised and
             a fresh operator started, so one run covers start-up (process
             start -> first reconcile decision) and a whole rollout, with the
             operator's peak RSS and CPU seconds and the control plane's.

The simulated fleet is hack/sim.sh: the real agent (agent/) on every node,
each authenticated as its node's agent pod, with a fake host; the fleet plays
the machines and kubelets with the admin identity, as this script does.
winpool's API requests are counted from the API server's audit log, filtered
to the operator's ServiceAccount; the agents' apart, filtered to theirs.
Everything measured is kept in <state>/results.json; the table is rendered
from it (--report-only re-renders without running).
"""

import argparse
import datetime as dt
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
from kube import Kube, create_many  # noqa: E402
from report import percentile, writes  # noqa: E402

RELEASE = "winpool"
SA_NAMESPACE = "winpool-system"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{RELEASE}"
AGENT_NS = "winpool-agents"
AGENT_USER = f"system:serviceaccount:{AGENT_NS}:winpool-agent"
BENCH_LABEL = "winpool-bench"
OS_BUILD = "10.0.20348"
RELEASE_BUILDS = {"ltsc2019": "10.0.17763", "ltsc2022": OS_BUILD, "ltsc2025": "10.0.26100"}
START_REVISION = 2700
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
# The simulated hosts' HNS always holds more than the cluster needs (no
# catch-up after a reboot), so a node is ready once it has booted: the
# per-node simulated time is apply + reboot.
HNS_FIXED = "1000000,1000000"
CLK_TCK = os.sysconf("SC_CLK_TCK")
STARTUP_S = 10
# How often the churn phase's agents read HNS: a real agent's default (WINPOOL_HNS_INTERVAL).
CHURN_HNS_INTERVAL = "15s"
# Experiments only: a directory for a CPU profile of kube-apiserver over each measured rollout
# (`go tool pprof -top FILE`), to see where the control plane's time goes.
APISERVER_PPROF_DIR = os.environ.get("WINPOOL_BENCH_APISERVER_PPROF", "")
APISERVER_PPROF_S = 40
# How long the control plane is watched at rest before a measured rollout (its floor).
REST_S = 20
CP_COMPONENTS = ["kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"]
POOLS = "/apis/winpool.dev/v1alpha1/windowsnodepools"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)


def parse_ts(s):
    """RFC 3339 (tracing, audit, Go's slog) -> epoch seconds. Go's RFC3339Nano trims trailing
    zeros, so a fraction has any number of digits, or none."""
    m = RFC3339.fullmatch(s.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    tz = "+00:00" if m[3] in ("Z", "z") else m[3]
    return dt.datetime.fromisoformat(m[1] + tz).timestamp() + float(f"0.{m[2] or 0}")


def proc_cpu(pid):
    """utime + stime of pid in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_mem(pid):
    """(VmRSS, VmHWM) in MiB, or (None, None)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) / 1024
    except OSError:
        pass
    return out.get("VmRSS"), out.get("VmHWM")


def machine_busy():
    """Non-idle CPU seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / CLK_TCK


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Sampler(threading.Thread):
    """Samples the RSS of the given pids every half second; keeps the peak per name."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = dict(pids)
        self.peak = defaultdict(float)
        self.series = defaultdict(list)
        self.stop_ev = threading.Event()

    def run(self):
        t0 = time.time()
        while not self.stop_ev.is_set():
            for name, pid in self.pids.items():
                rss, _ = proc_mem(pid)
                if rss is not None:
                    self.peak[name] = max(self.peak[name], rss)
                    self.series[name].append((round(time.time() - t0, 1), round(rss, 1)))
            self.stop_ev.wait(0.5)

    def stop(self):
        self.stop_ev.set()
        self.join()


class Bench:
    def __init__(self, a):
        self.a = a
        self.repo = a.repo
        self.state = a.state
        os.makedirs(self.state, exist_ok=True)
        self.cluster = os.environ["WINPOOL_CLUSTER"]
        self.procs = {}
        self.results = {"runs": [], "lifetimes": [], "setup": {}}
        self.results_path = os.path.join(self.state, "results.json")
        self.metrics_port = int(os.environ.get("WINPOOL_PORT_BASE", "26500")) + 90
        self.patch_seq = 0

    # -- processes ---------------------------------------------------------

    def sh(self, *cmd, input=None, check=True, env=None):
        r = subprocess.run(list(cmd), input=input, capture_output=True, text=True, env=env)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        return r.stdout

    def kubectl(self, *args, input=None, check=True):
        return self.sh(self.a.kubectl, "--kubeconfig", self.kubeconfig, *args, input=input, check=check)

    def spawn(self, name, args, kubeconfig, program=None, rust_log="info,kube=warn", extra_env=None):
        """Starts `program` (default: the winpool binary) with `args`, logging to <state>/logs/<name>.log."""
        path = os.path.join(self.state, "logs", f"{name}.log")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = open(path, "ab")
        env = dict(os.environ, KUBECONFIG=kubeconfig, RUST_LOG=rust_log, **(extra_env or {}))
        env.pop("POD_NAME", None)
        env.pop("POD_NAMESPACE", None)
        t0 = time.time()
        # Experiments only: a command prefix for the operator (e.g. `heaptrack -o FILE`).
        wrapper = os.environ.get("WINPOOL_BENCH_OPERATOR_WRAPPER", "").split() if program is None and args[0] == "run" else []
        p = subprocess.Popen([*wrapper, program or self.a.bin, *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        f.close()
        self.procs[name] = (p, path)
        return p, path, t0

    def stop(self, name, timeout=30):
        p, _ = self.procs.pop(name, (None, None))
        if p is None or p.poll() is not None:
            return
        # Each child leads its own process group (start_new_session): signal the group, so a
        # wrapper (WINPOOL_BENCH_OPERATOR_WRAPPER) and what it runs stop together.
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name, timeout=10)

    def check_alive(self, name):
        p, path = self.procs[name]
        if p.poll() is not None:
            tail = open(path, errors="replace").read()[-3000:]
            raise RuntimeError(f"{name} exited with {p.returncode}; log {path}:\n{tail}")

    # -- cluster -----------------------------------------------------------

    def cluster_up(self, phase):
        log(f"[{phase}] fresh control plane '{self.cluster}'")
        subprocess.run([self.a.cluster_script, "down"], check=True, stdout=subprocess.DEVNULL)
        t = time.time()
        subprocess.run([self.a.cluster_script, "up"], check=True, stdout=subprocess.DEVNULL)
        self.results["setup"][f"{phase}_cluster_up_s"] = round(time.time() - t, 1)
        self.kubeconfig = self.sh(self.a.cluster_script, "kubeconfig").strip()
        self.cluster_dir = os.path.dirname(self.kubeconfig)
        self.audit = os.path.join(self.cluster_dir, "logs", "audit.log")
        self.kube = Kube(self.a.kubectl, self.kubeconfig)
        self.cp_pids = {}
        for c in CP_COMPONENTS:
            with open(os.path.join(self.cluster_dir, "pids", f"{c}.pid")) as f:
                self.cp_pids[c] = int(f.read().strip())
        self.results.setdefault("versions", {})["kubernetes"] = self.kube.get("/version")["gitVersion"]
        self.install_crd_and_identity()

    def cluster_down(self, phase):
        self.stop_all()
        # `down` deletes the audit log with the cluster: keep winpool's and the agents' parts of it.
        if os.path.exists(self.audit):
            keep = {SA_USER.encode(): os.path.join(self.state, f"audit-{phase}-winpool.jsonl"),
                    AGENT_USER.encode(): os.path.join(self.state, f"audit-{phase}-agents.jsonl")}
            dsts = {needle: open(path, "wb") for needle, path in keep.items()}
            total = 0
            try:
                for path, _ in self.audit_files():
                    total += os.path.getsize(path)
                    with open(path, "rb") as src:
                        for line in src:
                            for needle, dst in dsts.items():
                                if needle in line:
                                    dst.write(line)
            finally:
                for dst in dsts.values():
                    dst.close()
            self.results["setup"][f"{phase}_audit_log_mib"] = round(total / 2**20, 1)
        if not self.a.keep:
            subprocess.run([self.a.cluster_script, "down"], check=True, stdout=subprocess.DEVNULL)

    def wait_established(self, crd, timeout=60.0):
        """Polls until the CRD is Established. `kubectl wait --for=condition`
        fails at once, rather than waiting, on a CRD read before the API
        server wrote any condition into it (".status.conditions accessor
        error: <nil>"), which a fresh control plane does one time in many."""
        deadline = time.monotonic() + timeout
        path = '{.status.conditions[?(@.type=="Established")].status}'
        while True:
            got = self.kubectl("get", f"crd/{crd}", "-o", f"jsonpath={path}", check=False)
            if got.strip() == "True":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {crd} not Established within {timeout:.0f}s")
            time.sleep(0.2)

    def install_crd_and_identity(self):
        for crd in ("windowsnodepools.winpool.dev", "windowsnodereports.winpool.dev", "windowsnodeoperations.winpool.dev"):
            self.kubectl("apply", "-f", os.path.join(self.repo, "crds", f"{crd}.yaml"))
            self.wait_established(crd)
        # The operator runs as the chart's ServiceAccount with the chart's RBAC,
        # exactly as installed; only the identity objects are applied (no Deployment).
        self.kubectl("create", "namespace", SA_NAMESPACE, check=False)
        # The agent namespace first: the chart's Role for DaemonSets lives in it.
        for templates in (["agent-namespace"],
                          ["serviceaccount", "clusterrole", "clusterrolebinding", "role-agents", "role-events", "role-leader-election"]):
            shows = [x for t in templates for x in ("--show-only", f"templates/{t}.yaml")]
            rendered = self.sh(
                self.a.helm, "template", RELEASE, os.path.join(self.repo, "charts", "winpool"), "--namespace", SA_NAMESPACE,
                "--kube-version", self.results["versions"]["kubernetes"], "--set", f"agentNamespace={AGENT_NS}", *shows,
            )
            self.kubectl("apply", "-f", "-", input=rendered)
        token = self.kubectl("create", "token", RELEASE, "-n", SA_NAMESPACE, "--duration=12h").strip()
        server = self.kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
        ca = self.kubectl("config", "view", "--minify", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority}")
        self.sa_kubeconfig = os.path.join(self.state, "operator.kubeconfig")
        kc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "bench", "cluster": {"server": server, "certificate-authority": ca}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "bench", "user": "sa"}}],
        }
        with open(self.sa_kubeconfig, "w") as f:
            json.dump(kc, f)
        os.chmod(self.sa_kubeconfig, 0o600)
        # The agents' identity, from the chart too: the fleet asks for tokens of its ServiceAccount
        # bound to each node's agent pod, and the admission policy holds each agent to its own Node.
        self.sh(self.a.agent_identity_script, AGENT_NS, env=dict(os.environ, KUBECONFIG=self.kubeconfig))

    # -- fleet ----------------------------------------------------------------

    def fleet_args(self, fleet, n, release="ltsc2022"):
        """The fleet's nodes <fleet>-0 … <fleet>-<n-1>, machines at the benchmark's starting build."""
        return [f"--nodes={n}", f"--name-prefix={fleet}-", f"--labels={BENCH_LABEL}={fleet}", f"--os={release}",
                f"--build={RELEASE_BUILDS[release]}.{START_REVISION}", "--log-format=json"]

    def create_nodes(self, fleet, n, release="ltsc2022"):
        """`hack/sim.sh --create-only`: creates those of the fleet's n nodes that are missing."""
        t = time.time()
        name = f"create-{fleet}"
        p, _, _ = self.spawn(name, ["--create-only", *self.fleet_args(fleet, n, release)], self.kubeconfig, program=self.a.sim_script)
        p.wait(self.a.timeout)
        if p.returncode != 0:
            self.check_alive(name)
        self.procs.pop(name)
        return time.time() - t

    def wait_nodes_ready(self, fleet, n, timeout=600):
        deadline = time.time() + timeout
        while True:
            nodes = self.kube.list_all("/api/v1/nodes", labelSelector=f"{BENCH_LABEL}={fleet}")
            ready = sum(
                1 for x in nodes
                if any(c["type"] == "Ready" and c["status"] == "True" for c in x.get("status", {}).get("conditions", []))
            )
            if ready >= n:
                return
            if time.time() > deadline:
                raise RuntimeError(f"only {ready} of {n} nodes of fleet {fleet} Ready after {timeout}s")
            time.sleep(3)

    def start_sim(self, fleet, n, hns=HNS_FIXED, extra=(), release="ltsc2022"):
        """The fleet playing its n nodes, each node's agent running while the node's agent pod does; their HNS
        holds fixed counts, or with hns="auto" follows the cluster's Services (the fleet's model of kube-proxy).
        Returns once the fleet runs (its informers synced)."""
        name = f"sim-{fleet}"
        path = os.path.join(self.state, "logs", f"{name}.log")
        offset = os.path.getsize(path) if os.path.exists(path) else 0
        self.spawn(
            name,
            ["--no-create", f"--agent-namespace={AGENT_NS}", f"--apply-time={self.a.apply_seconds}s",
             f"--reboot-time={self.a.reboot_seconds}s", f"--hns={hns}", *extra, *self.fleet_args(fleet, n, release)],
            self.kubeconfig, program=self.a.sim_script,
        )
        self.wait_for_log(path, '"fleet running"', 300, name, offset)

    def start_operator(self, name, synced=True):
        """Starts the operator; with `synced`, returns once its caches are synced."""
        args = ["run", f"--metrics-addr=127.0.0.1:{self.metrics_port}", f"--lease-namespace={SA_NAMESPACE}",
                f"--agent-namespace={AGENT_NS}", "--log-format=json"]
        # Experiments only (e.g. MALLOC_ARENA_MAX=2): extra environment for the operator, K=V,K=V.
        extra = dict(kv.split("=", 1) for kv in os.environ.get("WINPOOL_BENCH_OPERATOR_ENV", "").split(",") if "=" in kv)
        started = self.spawn(name, args, self.sa_kubeconfig, extra_env=extra)
        if synced:
            self.wait_for_log(started[1], "caches synced", 120, name)
        return started

    # -- pool -----------------------------------------------------------------

    def next_patch(self, build=OS_BUILD):
        """The next patch level above the fleets' starting build."""
        self.patch_seq += 1
        return f"{build}.{START_REVISION + 50 + 10 * self.patch_seq}"

    def pool(self, name, fleet, patch):
        """A new pool of the fleet's nodes at `patch`."""
        return {
            "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"matchLabels": {BENCH_LABEL: fleet}},
                "os": {"version": "ltsc2022", "patchLevel": patch},
                "rollout": {"maxUnavailable": self.a.max_unavailable, "nodeTimeout": "30m"},
                # Big enough for the footprint's 10,000 Services / 50,000 endpoints (HNSCapacity stays WithinLimits).
                "hns": {"maxLoadBalancers": 20000, "maxEndpoints": 100000},
            },
        }

    def set_pool(self, name, fleet, patch, rollout=None, os_version=None):
        """The pool at `patch` (and `os_version`), with `rollout` merged into its rollout: merge-patched, or
        created from pool() when there is none."""
        spec = {"os": {"patchLevel": patch, **({"version": os_version} if os_version else {})}, "rollout": rollout or {}}
        try:
            self.kube.get(f"{POOLS}/{name}")
            self.kube.merge_patch(f"{POOLS}/{name}", {"spec": spec})
        except Exception:
            p = self.pool(name, fleet, patch)
            p["spec"]["os"].update(spec["os"])
            p["spec"]["rollout"].update(spec["rollout"])
            self.kube.create(POOLS, p)

    def wait_pool_done(self, name, n, watch_procs, timeout, target=None):
        """Until status reports `target` (default all n) nodes updated for the current generation. Returns (t_done, timeline)."""
        target = n if target is None else target
        deadline = time.time() + timeout
        timeline = []
        last = None
        progress = [time.time()]

        def done(obj):
            nonlocal last
            st = obj.get("status") or {}
            nodes = st.get("nodes") or {}
            cur = (nodes.get("updated", 0), nodes.get("failed", 0))
            if st.get("observedGeneration") == obj["metadata"].get("generation"):
                if cur != last:
                    timeline.append((time.time(), cur[0]))
                    last = cur
                    progress[0] = time.time()
                if cur[1] > 0:
                    raise RuntimeError(f"pool {name}: {cur[1]} nodes failed: {st.get('failedNodes')}")
                return nodes.get("total") == n and cur[0] >= target
            return False

        while time.time() < deadline:
            for w in watch_procs:
                self.check_alive(w)
            if time.time() - progress[0] > self.a.stall:
                raise RuntimeError(f"pool {name}: no progress for {self.a.stall}s; nodes not updated: {self.stuck_nodes(name)}")
            obj = self.kube.get(f"{POOLS}/{name}")
            if done(obj):
                return time.time(), timeline
            rv = obj["metadata"]["resourceVersion"]
            try:
                for ev in self.kube.watch(POOLS, rv, timeout=20, fieldSelector=f"metadata.name={name}"):
                    if ev.get("type") in ("ADDED", "MODIFIED") and done(ev["object"]):
                        return time.time(), timeline
                    if time.time() > deadline:
                        break
            except OSError:
                pass
        raise RuntimeError(f"pool {name} not rolled out within {timeout}s")

    def stuck_nodes(self, pool):
        out = []
        for x in self.kube.list_all("/api/v1/nodes", labelSelector=f"winpool.dev/pool={pool}"):
            a = x["metadata"].get("annotations", {})
            if a.get("winpool.dev/state") != "Updated":
                info = x.get("status", {}).get("nodeInfo", {})
                out.append(f"{x['metadata']['name']} state={a.get('winpool.dev/state')} kernel={info.get('kernelVersion')} "
                           f"applied={a.get('winpool.dev/applied-revision')}/{a.get('winpool.dev/apply-status')}")
        return out[:10]

    # -- measurements --------------------------------------------------------

    def cp_cpu(self):
        return {c: proc_cpu(p) for c, p in self.cp_pids.items()}

    def cp_cpu_since(self, cp0):
        """Each control-plane component's CPU seconds since the cp_cpu() reading cp0."""
        return {c: round((now or 0) - (cp0[c] or 0), 2) for c, now in self.cp_cpu().items()}

    def scrape(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        m = {}
        for line in text.splitlines():
            if line.startswith("winpool_reconcile_duration_seconds_sum"):
                m["reconcile_seconds"] = float(line.split()[-1])
            elif line.startswith("winpool_reconcile_duration_seconds_count"):
                m["reconciles"] = int(float(line.split()[-1]))
            elif line.startswith("winpool_reconcile_errors_total"):
                m["reconcile_errors"] = m.get("reconcile_errors", 0) + int(float(line.split()[-1]))
        return m

    def audit_size(self):
        """A position in the audit log: (inode, offset). The API server rotates the log at 100 MB
        (audit.log -> audit-<time>.log), so a position names its file by inode."""
        try:
            st = os.stat(self.audit)
            return (st.st_ino, st.st_size)
        except OSError:
            return (None, 0)

    def audit_files(self):
        """Every audit log file, oldest first, as (path, inode)."""
        d = os.path.dirname(self.audit)
        files = [os.path.join(d, f) for f in os.listdir(d) if f.startswith("audit") and f.endswith(".log")]
        files.sort(key=lambda f: (f == self.audit, os.path.getmtime(f)))
        return [(f, os.stat(f).st_ino) for f in files]

    def audit_lines(self, start, end):
        """Lines between two positions, across rotations."""
        files = self.audit_files()
        inodes = [i for _, i in files]
        first = inodes.index(start[0]) if start[0] in inodes else 0
        last = inodes.index(end[0]) if end[0] in inodes else len(files) - 1
        for k in range(first, last + 1):
            path, _ = files[k]
            with open(path, "rb") as f:
                if k == first:
                    f.seek(start[1])
                data = f.read(end[1] - (start[1] if k == first else 0)) if k == last else f.read()
            yield from data.split(b"\n")

    def audit_census(self, start, end):
        """Every party's requests between two audit log positions, by user and "verb resource" (watches
        counted when they start): who asks the API server for what during a rollout, winpool and its
        agents beside the kubelets, the controllers and the benchmark itself."""
        census = defaultdict(Counter)
        for line in self.audit_lines(start, end):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            verb, stage = ev.get("verb"), ev.get("stage")
            if stage != ("ResponseStarted" if verb == "watch" else "ResponseComplete"):
                continue
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", ev.get("requestURI", "?").split("?")[0]) + (
                f"/{ref['subresource']}" if ref.get("subresource") else "")
            census[ev.get("user", {}).get("username", "?")][f"{verb} {res}"] += 1
        return {u: dict(c.most_common()) for u, c in census.items()}

    def audit_counts(self, start, end, user=SA_USER, after=None):
        """`user`'s requests between two audit log positions. With `after` (epoch seconds), lists
        received later than that are also counted apart (`lists_after_detail`): relists past start-up."""
        writes, lists, watches, codes, agents = Counter(), Counter(), Counter(), Counter(), Counter()
        lists_detail, lists_after = Counter(), Counter()
        latencies = []
        needle = user.encode()
        for line in self.audit_lines(start, end):
            if needle not in line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("user", {}).get("username") != user:
                continue
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            verb = ev.get("verb")
            stage = ev.get("stage")
            # The simulated agents name their node in the user agent: one entry per node would say nothing.
            agents[ev.get("userAgent", "").split(" (")[0]] += 1
            if verb == "watch":
                if stage == "ResponseStarted":
                    watches[res] += 1
                    # A streaming list (WatchList) is a watch that starts with the whole collection.
                    if "sendInitialEvents=true" in ev.get("requestURI", ""):
                        lists[res] += 1
                        lists_detail[f"{res} (streamed)"] += 1
                        if after is not None and parse_ts(ev["requestReceivedTimestamp"]) > after:
                            lists_after[f"{res} (streamed)"] += 1
                continue
            if stage != "ResponseComplete":
                continue
            code = (ev.get("responseStatus") or {}).get("code")
            uri = ev.get("requestURI", "")
            if verb in WRITE_VERBS:
                writes[f"{verb} {res}"] += 1
                try:
                    latencies.append(parse_ts(ev["stageTimestamp"]) - parse_ts(ev["requestReceivedTimestamp"]))
                except (KeyError, ValueError):
                    pass
                if code and code >= 400:
                    codes[f"{verb} {res} {code}"] += 1
            elif verb == "list":
                kind = "page" if "continue=" in uri else ("fieldSelector" if "fieldSelector=" in uri else "full")
                lists[res] += 1
                lists_detail[f"{res} ({kind})"] += 1
                if after is not None and parse_ts(ev["requestReceivedTimestamp"]) > after:
                    lists_after[f"{res} ({kind})"] += 1
        return {
            "writes": dict(writes), "lists": dict(lists), "lists_detail": dict(lists_detail), "lists_after_detail": dict(lists_after),
            "watches": dict(watches), "errors": dict(codes), "user_agents": dict(agents),
            "write_latency_ms": {
                "p50": round(statistics.median(latencies) * 1000, 1) if latencies else None,
                "p90": round(sorted(latencies)[int(len(latencies) * 0.9)] * 1000, 1) if latencies else None,
            },
        }

    def json_log(self, path, offset, time_key):
        """The JSON lines of a log from `offset` that carry a time under `time_key` (the operator's
        tracing: "timestamp"; the fleet's slog: "time")."""
        events = []
        with open(path, "rb") as f:
            f.seek(offset)
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict) and time_key in ev:
                    events.append(ev)
        return events

    def operator_log(self, path, offset):
        return self.json_log(path, offset, "timestamp")

    def fleet_log(self, path, offset):
        return self.json_log(path, offset, "time")

    def phases(self, op_events, sim_events, t0):
        """Per-node timestamps of each state change (operator log) and of the agent's success report
        (the real agent's "step" lines in the fleet's log)."""
        node = defaultdict(dict)
        first_decision = None
        synced = None
        for ev in op_events:
            t = parse_ts(ev["timestamp"])
            if t < t0 - 1:
                continue
            f = ev.get("fields", {})
            msg = f.get("message", "")
            if synced is None and "caches synced" in msg:
                synced = t
            if "from" in f and "to" in f and "node" in f:
                node[f["node"]].setdefault(f["to"], t)
                if first_decision is None:
                    first_decision = t
            elif msg.startswith("applied agent DaemonSet") or msg == "status updated":
                if first_decision is None:
                    first_decision = t
        for ev in sim_events:
            if ev.get("msg") == "step" and ev.get("status") == "Succeeded" and "node" in ev:
                t = parse_ts(ev["time"])
                if t >= t0:
                    node[ev["node"]].setdefault("Reported", t)
        return node, first_decision, synced

    def profile(self, nodes, t0, t_done, in_flight_limit):
        sim_time = self.a.apply_seconds + self.a.reboot_seconds
        d = defaultdict(list)
        busy = 0.0
        for ts in nodes.values():
            start = ts.get("Draining") or ts.get("Applying")
            end = ts.get("Updated")
            if start and end:
                d["in_flight"].append(end - start)
                busy += end - start
            if ts.get("Draining") and ts.get("Applying"):
                d["drain_round"].append(ts["Applying"] - ts["Draining"])
            if ts.get("Applying") and ts.get("Reported"):
                d["agent_overhead"].append(ts["Reported"] - ts["Applying"] - sim_time)
            if ts.get("Reported") and end:
                d["verify"].append(end - ts["Reported"])
        starts = sorted(ts.get("Draining") or ts.get("Applying") for ts in nodes.values() if ts.get("Draining") or ts.get("Applying"))
        out = {k: round(median(v), 2) for k, v in d.items() if v}
        out["first_start_after_s"] = round(starts[0] - t0, 2) if starts else None
        wall = t_done - t0
        out["slot_utilisation"] = round(busy / (in_flight_limit * wall), 3) if wall > 0 else None
        return out

    # -- runs -------------------------------------------------------------------

    def run_record(self, **kw):
        rec = dict(kw)
        self.results["runs"].append(rec)
        self.save()
        return rec

    def save(self):
        with open(self.results_path, "w") as f:
            json.dump(self.results, f, indent=1)

    def runs(self):
        """The warm-up runs (not in the medians), then the measured ones: (kind, index)."""
        return [("first", None)] * self.a.warmup + [("measured", i) for i in range(self.a.runs)]

    def max_unavailable(self, n):
        v = str(self.a.max_unavailable)
        return max(1, n * int(v.rstrip("%")) // 100) if v.endswith("%") else max(1, int(v))

    def ideal(self, n, target=None):
        """ceil(nodes to update / maxUnavailable) x the simulated time per node."""
        return math.ceil((n if target is None else target) / self.max_unavailable(n)) * (self.a.apply_seconds + self.a.reboot_seconds)

    def phase_rollout(self):
        self.cluster_up("rollout")
        for n in self.a.rollout_sizes:
            fleet = f"r{n}"
            log(f"[rollout {n}] creating {n} simulated nodes")
            created = self.create_nodes(fleet, n)
            self.wait_nodes_ready(fleet, n)
            log(f"[rollout {n}] {n} nodes Ready ({created:.0f}s to create)")
            self.start_sim(fleet, n)
            a0 = self.audit_size()
            p, _, t_start = self.start_operator(f"operator-{fleet}")
            pool = f"bench-{fleet}"
            for kind, i in self.runs():
                self.one_rollout(n, fleet, pool, kind, i, p)
            time.sleep(2)
            # Lists in the first STARTUP_S of the operator's life are its initial sync (and a retry if a
            # watch fails right away); any full list after that is a relist.
            self.results["lifetimes"].append(
                {"phase": "rollout", "nodes": n, "seconds": round(time.time() - t_start, 1), "startup_s": STARTUP_S,
                 "audit": self.audit_counts(a0, self.audit_size(), after=t_start + STARTUP_S)}
            )
            self.stop(f"operator-{fleet}")
            self.stop(f"sim-{fleet}")
            self.cleanup_fleet(fleet, pool)
        self.cluster_down("rollout")

    def apiserver_at_rest(self):
        """kube-apiserver's CPU-s per second while nothing is asked of the pool: the simulated kubelets'
        heartbeats, the controllers' resyncs and the watches held open. A rollout's CPU is this floor times its
        duration plus what the rollout adds."""
        c0, t0 = self.cp_cpu()["kube-apiserver"] or 0, time.time()
        time.sleep(REST_S)
        return round(((self.cp_cpu()["kube-apiserver"] or 0) - c0) / (time.time() - t0), 3)

    def one_rollout(self, n, fleet, pool, kind, i, p):
        name = f"operator-{fleet}"
        op_log = self.procs[name][1]
        sim_proc, sim_log = self.procs[f"sim-{fleet}"]
        rest = self.apiserver_at_rest() if kind == "measured" else None
        op_off, sim_off = os.path.getsize(op_log), os.path.getsize(sim_log)
        a0 = self.audit_size()
        cpu0, cp0, sim0 = proc_cpu(p.pid), self.cp_cpu(), proc_cpu(sim_proc.pid)
        busy0 = machine_busy()
        m0 = self.scrape()
        patch = self.next_patch()
        log(f"[rollout {n}] {kind} rollout{'' if i is None else f' {i + 1}/{self.a.runs}'}: pool {pool} -> {patch}")
        t0 = time.time()
        self.set_pool(pool, fleet, patch)
        profiler = self.profile_apiserver(f"rollout-{n}-{kind}-{i}") if kind == "measured" else None
        t_done, timeline = self.wait_pool_done(pool, n, [name, f"sim-{fleet}"], self.a.timeout)
        actual = t_done - t0
        time.sleep(3)  # writes that follow the last update (status, events) belong to the run
        if profiler:
            profiler.join()
        m1 = self.scrape()
        a1 = self.audit_size()
        audit = self.audit_counts(a0, a1)
        agent_audit = self.audit_counts(a0, a1, user=AGENT_USER)
        nodes, _, _ = self.phases(self.operator_log(op_log, op_off), self.fleet_log(sim_log, sim_off), t0)
        op_cpu = proc_cpu(p.pid) - cpu0
        sim_cpu = (proc_cpu(sim_proc.pid) or 0) - (sim0 or 0)
        cp_cpu = self.cp_cpu_since(cp0)
        busy = machine_busy() - busy0
        rec = self.run_record(
            phase="rollout", kind=kind, nodes=n, run=i, patch=patch,
            actual_s=round(actual, 2), ideal_s=self.ideal(n), ratio=round(actual / self.ideal(n), 3),
            operator_cpu_s=round(op_cpu, 2),
            operator_hwm_mib=round(proc_mem(p.pid)[1] or 0, 1),
            sim_cpu_s=round(sim_cpu, 2), sim_hwm_mib=round(proc_mem(sim_proc.pid)[1] or 0, 1), cp_cpu_s=cp_cpu,
            machine_busy_s=round(busy, 1), other_cpu_s=round(busy - op_cpu - sim_cpu - sum(cp_cpu.values()), 1),
            apiserver_rest_cpu_per_s=rest,
            reconciles=m1.get("reconciles", 0) - m0.get("reconciles", 0),
            reconcile_seconds=round(m1.get("reconcile_seconds", 0) - m0.get("reconcile_seconds", 0), 2),
            audit=audit, agent_audit=agent_audit, profile=self.profile(nodes, t0, t_done, self.max_unavailable(n)),
            census=self.audit_census(a0, a1),
            timeline=[(round(t - t0, 2), u) for t, u in timeline],
        )
        log(f"[rollout {n}]   {actual:.1f}s (ideal {rec['ideal_s']}s, x{rec['ratio']}), "
            f"writes/node: winpool {writes(audit) / n:.2f}, agents {writes(agent_audit) / n:.2f}; "
            f"fleet CPU {rec['sim_cpu_s']}s, VmHWM {rec['sim_hwm_mib']} MiB; profile {rec['profile']}")

    def profile_apiserver(self, label):
        """With WINPOOL_BENCH_APISERVER_PPROF: kube-apiserver's CPU profile over the next APISERVER_PPROF_S
        seconds, fetched on a thread into that directory; None otherwise."""
        if not APISERVER_PPROF_DIR:
            return None
        os.makedirs(APISERVER_PPROF_DIR, exist_ok=True)
        path = os.path.join(APISERVER_PPROF_DIR, f"{label}.pprof")

        def fetch():
            r = subprocess.run([self.a.kubectl, "--kubeconfig", self.kubeconfig, "get", "--raw",
                                f"/debug/pprof/profile?seconds={APISERVER_PPROF_S}"], capture_output=True)
            if r.returncode == 0:
                with open(path, "wb") as f:
                    f.write(r.stdout)
                log(f"kube-apiserver CPU profile: {path}")
            else:
                log(f"kube-apiserver CPU profile failed: {r.stderr.decode(errors='replace').strip()[-300:]}")

        t = threading.Thread(target=fetch, daemon=True)
        t.start()
        return t

    def wait_for_log(self, path, text, timeout, name, offset=0):
        """Until a line of the log from `offset` on contains `text` (the process `name` must stay up)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.check_alive(name)
            with open(path, errors="replace") as f:
                f.seek(offset)
                if any(text in line for line in f):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"'{text}' not in {path} after {timeout}s")

    def cleanup_fleet(self, fleet, pool):
        """The next size starts from a clean slate: no pool, no agent DaemonSets or revision ConfigMaps, no nodes
        of this fleet."""
        path = f"{POOLS}/{pool}"
        try:
            self.kube.merge_patch(path, {"metadata": {"finalizers": None}})
            self.kube.request("DELETE", path, ok=(200, 202, 404))
        except Exception as e:  # noqa: BLE001
            log(f"cleanup of pool {pool}: {e}")
        self.kubectl("delete", "daemonsets", "-n", AGENT_NS, "--all", "--wait=false", check=False)
        self.kubectl("delete", "configmaps", "-n", AGENT_NS, "-l", "app.kubernetes.io/managed-by=winpool", "--wait=false", check=False)
        self.kubectl("delete", "nodes", "-l", f"{BENCH_LABEL}={fleet}", "--wait=false", check=False)

    def create_services(self, services, endpoints):
        """Selector-less Services with hand-made EndpointSlices (endpoints spread evenly)."""
        t = time.time()
        # The local control plane's default Service range is a /24; a second ServiceCIDR makes room.
        self.kube.create("/apis/networking.k8s.io/v1/servicecidrs",
                         {"metadata": {"name": "bench"}, "spec": {"cidrs": ["10.96.0.0/16"]}})
        for _ in range(60):
            cidr = self.kube.get("/apis/networking.k8s.io/v1/servicecidrs/bench")
            if any(c["type"] == "Ready" and c["status"] == "True" for c in (cidr.get("status") or {}).get("conditions", [])):
                break
            time.sleep(1)
        namespaces = max(1, services // 1000)
        for k in range(namespaces):
            self.kube.create("/api/v1/namespaces", {"metadata": {"name": f"bench-svc-{k}"}})
        svc_items, slice_items = [], []
        per = endpoints // services if services else 0
        extra = endpoints - per * services
        ip = 0
        for s in range(services):
            ns = f"bench-svc-{s % namespaces}"
            name = f"svc-{s}"
            svc_items.append((f"/api/v1/namespaces/{ns}/services",
                              {"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}))
            count = per + (1 if s < extra else 0)
            eps = []
            for _ in range(count):
                a = 0x0A400000 + ip  # 10.64.0.0 upwards, one address per endpoint
                ip += 1
                eps.append({"addresses": [f"{a >> 24 & 255}.{a >> 16 & 255}.{a >> 8 & 255}.{a & 255}"], "conditions": {"ready": True}})
            if eps:
                slice_items.append((f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {
                    "metadata": {"name": f"{name}-bench", "labels": {
                        "kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "winpool-bench"}},
                    "addressType": "IPv4", "endpoints": eps,
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                }))
        create_many(self.kube, svc_items)
        create_many(self.kube, slice_items)
        took = time.time() - t
        self.results["setup"]["services"] = services
        self.results["setup"]["endpoints"] = endpoints
        self.results["setup"]["services_create_s"] = round(took, 1)
        log(f"[footprint] {services} Services, {len(slice_items)} EndpointSlices, {endpoints} endpoints in {took:.0f}s")

    def phase_churn(self):
        """A pool at rest while a Service's endpoints change every second (issue 30's steady state): what
        winpool and its agents write meanwhile (the point: no Node write), and whether the agents' HNS counts
        still reach winpool (every node HNS-ready at the end)."""
        self.cluster_up("churn")
        n = self.a.churn_nodes
        fleet = f"c{n}"
        log(f"[churn {n}] creating {n} simulated nodes")
        self.create_nodes(fleet, n)
        self.wait_nodes_ready(fleet, n)
        # The agents read HNS as often as a real agent does (agent.DefaultHNSInterval), not every second as in tests.
        self.start_sim(fleet, n, hns="auto", extra=[f"--hns-interval={CHURN_HNS_INTERVAL}"])
        name = f"operator-{fleet}"
        p, _, _ = self.start_operator(name)
        pool = f"bench-{fleet}"
        self.set_pool(pool, fleet, self.next_patch())
        self.wait_pool_done(pool, n, [name, f"sim-{fleet}"], self.a.timeout)
        time.sleep(10)  # what follows the rollout (status, Events, the last reports) is not the churn's
        ns = "bench-churn"
        self.kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        self.kube.create(f"/api/v1/namespaces/{ns}/services",
                         {"metadata": {"name": "churn"}, "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
        slices = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"

        # 1 to 7 endpoints: a period prime to the agents' read interval (15 s), so that each read sees another
        # count (a period of 5 made every 15-second read see the same one).
        def endpoints(k):
            return [{"addresses": [f"10.65.0.{i + 1}"], "conditions": {"ready": True}} for i in range(1 + k % 7)]

        self.kube.create(slices, {
            "metadata": {"name": "churn-bench", "labels": {"kubernetes.io/service-name": "churn",
                                                           "endpointslice.kubernetes.io/managed-by": "winpool-bench"}},
            "addressType": "IPv4", "endpoints": endpoints(0), "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
        time.sleep(5)
        a0, cp0, t0 = self.audit_size(), self.cp_cpu(), time.time()
        sim_proc = self.procs[f"sim-{fleet}"][0]
        op0, sim0 = proc_cpu(p.pid), proc_cpu(sim_proc.pid)
        log(f"[churn {n}] the Service's endpoints change every second for {self.a.churn_seconds:.0f}s")
        k = 0
        while time.time() - t0 < self.a.churn_seconds:
            k += 1
            self.kube.merge_patch(f"{slices}/churn-bench", {"endpoints": endpoints(k)})
            self.check_alive(name)
            time.sleep(max(0.0, t0 + k - time.time()))
        time.sleep(10)  # the last change's reports and rounds belong to the run
        a1 = self.audit_size()
        cp_cpu = self.cp_cpu_since(cp0)
        nodes = self.kube.list_all("/api/v1/nodes", labelSelector=f"{BENCH_LABEL}={fleet}")

        def hns_ready(node):
            return any(c["type"] == "WindowsHNSReady" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))

        rec = {
            "nodes": n, "seconds": round(time.time() - t0, 1), "changes": k,
            "audit": self.audit_counts(a0, a1), "agent_audit": self.audit_counts(a0, a1, user=AGENT_USER),
            "cp_cpu_s": cp_cpu,
            "operator_cpu_s": round(proc_cpu(p.pid) - op0, 2), "sim_cpu_s": round((proc_cpu(sim_proc.pid) or 0) - (sim0 or 0), 2),
            "hns_ready_at_end": sum(1 for nd in nodes if hns_ready(nd)), "agent_hns_interval": CHURN_HNS_INTERVAL,
        }
        self.results.setdefault("churn", []).append(rec)
        node_writes = sum(v for a in (rec["audit"], rec["agent_audit"]) for key, v in a["writes"].items()
                          if key.split(" ")[-1] in ("nodes", "nodes/status"))
        log(f"[churn {n}] {k} endpoint changes in {rec['seconds']}s: Node writes by winpool and agents {node_writes}, "
            f"agents' writes {rec['agent_audit']['writes']}, HNS-ready at the end {rec['hns_ready_at_end']}/{n}")
        self.save()
        self.stop(name)
        self.stop(f"sim-{fleet}")
        self.cleanup_fleet(fleet, pool)
        self.cluster_down("churn")

    def phase_staging(self):
        """Downloads before the drain (issue 47): --staging-nodes simulated nodes whose update's download takes as long
        as its install (--download-time = --apply-time), rolled once with rollout.staging Disabled and once Enabled.
        Measured: each node's time out of service, cordon (Draining) → uncordon (Updated), from the operator's log."""
        self.cluster_up("staging")
        n, fleet, pool = self.a.staging_nodes, "stg", "bench-stg"
        self.create_nodes(fleet, n)
        self.wait_nodes_ready(fleet, n)
        self.start_sim(fleet, n, extra=(f"--download-time={self.a.apply_seconds}s",))
        name = f"operator-{fleet}"
        _, op_log, _ = self.start_operator(name)
        for mode in ("Disabled", "Enabled"):
            op_off = os.path.getsize(op_log)
            patch = self.next_patch()
            log(f"[staging] rollout.staging {mode}: pool {pool} -> {patch}")
            t0 = time.time()
            self.set_pool(pool, fleet, patch, rollout={"staging": mode == "Enabled"})
            t_done, _ = self.wait_pool_done(pool, n, [name, f"sim-{fleet}"], self.a.timeout)
            nodes, _, _ = self.phases(self.operator_log(op_log, op_off), [], t0)
            out = sorted(ts["Updated"] - ts["Draining"] for ts in nodes.values() if "Draining" in ts and "Updated" in ts)
            rec = {"mode": mode, "nodes": n, "max_unavailable": self.a.max_unavailable, "apply_s": self.a.apply_seconds,
                   "download_s": self.a.apply_seconds, "reboot_s": self.a.reboot_seconds, "makespan_s": round(t_done - t0, 1),
                   "out_of_service_s": [round(x, 2) for x in out]}
            self.results.setdefault("staging", []).append(rec)
            self.save()
            log(f"[staging]   {mode}: {len(out)} nodes, out of service median {median(out):.1f}s, "
                f"p95 {percentile(out, 0.95):.1f}s; makespan {rec['makespan_s']}s")
        self.stop(name)
        self.cleanup_fleet(fleet, pool)
        self.cluster_down("staging")

    def phase_hotpatch(self):
        """A simulated year on a Windows Server 2025 pool enrolled in hotpatching (issue 47): --hotpatch-nodes nodes
        with --hotpatch-pods-per-node pods on them, 12 monthly patch levels (the fleet's months 1, 4, 7 and 10 are
        quarterly baselines, the others hotpatches: --hotpatch enrolled), rolled with rollout.hotpatch Disabled on one
        fleet and Enabled on another, maxUnavailable 50%. Measured: winpool's evictions (the audit log) and the
        machines' reboots and hotpatches (the fleet's --stats-file), per node and year."""
        self.cluster_up("hotpatch")
        n, release = self.a.hotpatch_nodes, "ltsc2025"
        for mode in ("Disabled", "Enabled"):
            fleet, pool = f"hp{mode[0].lower()}", f"bench-hp{mode[0].lower()}"
            self.create_nodes(fleet, n, release)
            self.wait_nodes_ready(fleet, n)
            self.create_workload(fleet, max(1, n // 2), n * self.a.hotpatch_pods_per_node)
            stats = os.path.join(self.state, f"stats-{fleet}.json")
            if os.path.exists(stats):
                os.remove(stats)
            self.start_sim(fleet, n, release=release, extra=["--hotpatch=enrolled", f"--stats-file={stats}"])
            name = f"operator-{fleet}"
            self.start_operator(name)
            a0, t0 = self.audit_size(), time.time()
            for month in range(1, 13):
                patch = f"{RELEASE_BUILDS[release]}.{START_REVISION + 10 * month}"
                self.set_pool(pool, fleet, patch, os_version=release,
                              rollout={"maxUnavailable": "50%", "nodeTimeout": "30m", "hotpatch": mode == "Enabled"})
                self.wait_pool_done(pool, n, [name, f"sim-{fleet}"], self.a.timeout)
                log(f"[hotpatch {mode}] month {month}: {patch} on every node")
            time.sleep(3)
            evictions = self.audit_counts(a0, self.audit_size())["writes"].get("create pods/eviction", 0)
            self.stop(f"sim-{fleet}")
            with open(stats) as f:
                machines = json.load(f)
            rec = {"mode": mode, "nodes": n, "pods_per_node": self.a.hotpatch_pods_per_node, "months": 12,
                   "makespan_s": round(time.time() - t0, 1), "evictions": evictions,
                   "reboots": sum(m["reboots"] for m in machines), "hotpatches": sum(m.get("hotpatches", 0) for m in machines)}
            self.results.setdefault("hotpatch", []).append(rec)
            self.save()
            log(f"[hotpatch {mode}] a year: {evictions / n:.1f} evictions and {rec['reboots'] / n:.1f} reboots per node, "
                f"{rec['hotpatches'] / n:.1f} hotpatches per node; {rec['makespan_s']}s")
            self.stop(name)
            self.kubectl("delete", "namespace", f"bench-hns-{fleet}", "--wait=false", check=False)
            self.cleanup_fleet(fleet, pool)
        self.cluster_down("hotpatch")

    def phase_compliance(self):
        """kubectl winpool compliance over a fleet's year of records (issue 68): --compliance-nodes nodes with 13 ended
        operations each, synthesised by examples/compliance_scale.rs (no cluster: what is timed is the answer once the
        records are read). Measured: seconds to answer, and one record's bytes as JSON, per node and year."""
        out = subprocess.run(["cargo", "run", "-q", "--release", "--example", "compliance_scale", "--", str(self.a.compliance_nodes)],
                             cwd=self.repo, check=True, capture_output=True, text=True).stdout
        rec = {k: float(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}
        self.results.setdefault("compliance", []).append(rec)
        self.save()
        log(f"[compliance] {rec['compliance_nodes']:.0f} nodes, {rec['compliance_records']:.0f} records: {rec['compliance_seconds']}s; "
            f"{rec['record_bytes']:.0f} bytes a record")

    def phase_hns(self):
        """Rollouts paced by HNS (issue 46): per release, --hns-nodes simulated nodes, --hns-services Services with
        --hns-pods-per-node pods per node behind them (Deployments; kwok runs the pods, the EndpointSlice controller
        writes their slices), rolled with maxUnavailable 10% with rollout.hnsPacing off, then on. Measured: the
        fleet's network-programming latency (from each Service or EndpointSlice change to each node's HNS holding
        it, at the release's published pace: --latency-file) and the rollout's makespan."""
        self.cluster_up("hns")
        n, services = self.a.hns_nodes, self.a.hns_services
        for release in self.a.hns_releases.split(","):
            fleet = f"h{release[-4:]}"
            log(f"[hns {release}] creating {n} simulated nodes")
            self.create_nodes(fleet, n, release)
            self.wait_nodes_ready(fleet, n)
            self.create_workload(fleet, services, n * self.a.hns_pods_per_node)
            name = f"operator-{fleet}"
            self.start_operator(name)
            pool = f"bench-{fleet}"
            # The pool's first rollout starts its agents; not measured. Its target is the build the nodes run,
            # so no node installs or reboots: its nodes are drained and back in service at once.
            self.hns_rollout(release, fleet, n, pool, pacing=False, measured=False)
            for pacing in (False, True):
                self.hns_rollout(release, fleet, n, pool, pacing=pacing, measured=True)
            self.stop(name)
            self.kubectl("delete", "namespace", f"bench-hns-{fleet}", "--wait=false", check=False)
            self.cleanup_fleet(fleet, pool)
        self.cluster_down("hns")

    def create_workload(self, fleet, services, pods):
        """`services` Services, each over a Deployment; `pods` pods in all, spread evenly, on the fleet's nodes.
        Returns once every pod is ready and in its Service's EndpointSlice."""
        ns = f"bench-hns-{fleet}"
        t = time.time()
        self.kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        svc_items, deploy_items = [], []
        for s in range(services):
            replicas = pods // services + (1 if s < pods % services else 0)
            labels = {"app": f"s{s}"}
            svc_items.append((f"/api/v1/namespaces/{ns}/services", {"metadata": {"name": f"s{s}"}, "spec": {
                "selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}))
            deploy_items.append((f"/apis/apps/v1/namespaces/{ns}/deployments", {"metadata": {"name": f"s{s}"}, "spec": {
                "replicas": replicas, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {
                    "nodeSelector": {BENCH_LABEL: fleet},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 8080}]}]}}}}))
        create_many(self.kube, svc_items)
        create_many(self.kube, deploy_items)
        deadline = time.time() + self.a.timeout
        while True:
            slices = self.kube.list_all(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices")
            ready = sum(1 for sl in slices for e in (sl.get("endpoints") or []) if (e.get("conditions") or {}).get("ready"))
            if ready >= pods:
                break
            if time.time() > deadline:
                raise RuntimeError(f"only {ready} of {pods} pods ready behind their Services after {self.a.timeout}s")
            time.sleep(5)
        took = time.time() - t
        self.results["setup"][f"hns_{fleet}_workload_s"] = round(took, 1)
        log(f"[hns] {services} Services, {pods} pods ready behind them in {took:.0f}s")

    def hns_rollout(self, release, fleet, n, pool, pacing, measured):
        """One rollout of the pool to the next patch level, with a fleet of its own (whose latency file is this
        run's alone) reading HNS as often as real agents do."""
        latency_path = os.path.join(self.state, f"latency-{fleet}-{'paced' if pacing else 'unpaced'}.json")
        if os.path.exists(latency_path):
            os.remove(latency_path)
        self.start_sim(fleet, n, hns="auto", release=release,
                       extra=[f"--hns-interval={CHURN_HNS_INTERVAL}", f"--latency-file={latency_path}"])
        build = RELEASE_BUILDS[release]
        patch = self.next_patch(build) if measured else f"{build}.{START_REVISION}"
        rollout = {"maxUnavailable": self.a.max_unavailable, "nodeTimeout": "60m", "drain": {"timeout": "60m"},
                   "hnsPacing": {"enabled": pacing}}
        log(f"[hns {release}] {'measured' if measured else 'first'} rollout, pacing {'on' if pacing else 'off'}: pool {pool} -> {patch}")
        t0 = time.time()
        self.set_pool(pool, fleet, patch, rollout=rollout, os_version=release)
        t_done, _ = self.wait_pool_done(pool, n, [f"operator-{fleet}", f"sim-{fleet}"], self.a.timeout)
        makespan = t_done - t0
        time.sleep(5)  # the last evicted pods' replacements are programmed too
        self.stop(f"sim-{fleet}")
        if not measured:
            return
        with open(latency_path) as f:
            latency = json.load(f)
        rec = {"release": release, "nodes": n, "services": self.a.hns_services, "pods_per_node": self.a.hns_pods_per_node,
               "max_unavailable": self.a.max_unavailable, "pacing": pacing, "makespan_s": round(makespan, 1),
               "latency": {k: latency[k] for k in ("changes", "meanMs", "p50Ms", "p99Ms", "maxMs")},
               # The part programmed in the first two syncs after a node's catch-up from its boot.
               "after_catch_up": latency.get("afterCatchUp")}
        self.results.setdefault("hns", []).append(rec)
        self.save()
        lat = rec["latency"]
        log(f"[hns {release}]   pacing {'on' if pacing else 'off'}: makespan {makespan:.0f}s; programming latency over "
            f"{lat['changes']} node-changes p50 {lat['p50Ms'] / 1000:.1f}s p99 {lat['p99Ms'] / 1000:.1f}s max {lat['maxMs'] / 1000:.1f}s")
        if after := rec["after_catch_up"]:
            log(f"[hns {release}]   of them in the two syncs after a node's catch-up from its boot: {after['changes']}, "
                f"p50 {after['p50Ms'] / 1000:.1f}s p99 {after['p99Ms'] / 1000:.1f}s")

    def phase_footprint(self):
        self.cluster_up("footprint")
        self.create_services(self.a.services, self.a.endpoints)
        fleet = "fp"
        pool = "bench-fp"
        have = 0
        for n in self.a.footprint_sizes:
            log(f"[footprint {n}] adding {n - have} simulated nodes")
            created = self.create_nodes(fleet, n)
            self.wait_nodes_ready(fleet, n)
            log(f"[footprint {n}] {n} nodes Ready ({created:.0f}s to create)")
            have = n
            # A fleet plays the nodes it found at its start: more nodes take a new one (the agents start again).
            self.stop(f"sim-{fleet}")
            self.start_sim(fleet, n)
            for kind, i in self.runs():
                self.one_footprint(n, fleet, pool, kind, i, self.a.fraction)
        if self.a.whole:
            # One whole rollout at the largest size: what a full rollout costs there (one run; it is long).
            self.one_footprint(have, fleet, pool, "whole", None, 1.0)
        self.stop(f"sim-{fleet}")
        self.cluster_down("footprint")

    def one_footprint(self, n, fleet, pool, kind, i, fraction):
        """Operator (re)started after a patch-level change; measured until `fraction` of the nodes are updated."""
        name = f"operator-{fleet}"
        target = max(1, math.ceil(n * fraction))
        patch = self.next_patch()
        self.set_pool(pool, fleet, patch)  # the operator is not running: it finds the new patch level at start
        sim_proc, sim_log = self.procs[f"sim-{fleet}"]
        sim_off = os.path.getsize(sim_log)
        log(f"[footprint {n}] {kind} run{'' if i is None else f' {i + 1}/{self.a.runs}'}: pool {pool} -> {patch}, operator started, "
            f"until {target} nodes are updated")
        time.sleep(1)
        a0 = self.audit_size()
        cp0, sim0 = self.cp_cpu(), proc_cpu(sim_proc.pid)
        busy0 = machine_busy()
        p, op_log, t0 = self.start_operator(name, synced=False)
        op_off = 0 if not os.path.exists(op_log) else os.path.getsize(op_log)
        sampler = Sampler({"winpool": p.pid, "kube-apiserver": self.cp_pids["kube-apiserver"], "etcd": self.cp_pids["etcd"]})
        sampler.start()
        try:
            t_done, timeline = self.wait_pool_done(pool, n, [name, f"sim-{fleet}"], self.a.timeout, target)
        finally:
            sampler.stop()
        cpu = proc_cpu(p.pid)
        _, hwm = proc_mem(p.pid)
        cp_cpu, sim1 = self.cp_cpu_since(cp0), proc_cpu(sim_proc.pid)
        _, sim_hwm = proc_mem(sim_proc.pid)
        busy = machine_busy() - busy0
        m = self.scrape()
        time.sleep(2)
        self.stop(name)
        a1 = self.audit_size()
        audit = self.audit_counts(a0, a1)
        agent_audit = self.audit_counts(a0, a1, user=AGENT_USER)
        events = self.operator_log(op_log, 0)
        # Only this process's lines: the log file is appended to by every run.
        events = [e for e in events if parse_ts(e["timestamp"]) >= t0 - 0.5]
        nodes, first_decision, synced = self.phases(events, self.fleet_log(sim_log, sim_off), t0)
        actual = t_done - t0
        ideal = self.ideal(n, target)
        rec = self.run_record(
            phase="footprint", kind=kind, nodes=n, run=i, patch=patch, target=target,
            services=self.a.services, endpoints=self.a.endpoints,
            actual_s=round(actual, 2), ideal_s=ideal, ratio=round(actual / ideal, 3),
            startup_s=round(first_decision - t0, 2) if first_decision else None,
            synced_s=round(synced - t0, 2) if synced else None,
            operator_cpu_s=cpu, operator_hwm_mib=round(hwm or 0, 1),
            operator_rss_series=sampler.series["winpool"][::4],
            sim_cpu_s=round((sim1 or 0) - (sim0 or 0), 2), sim_hwm_mib=round(sim_hwm or 0, 1), cp_cpu_s=cp_cpu,
            machine_busy_s=round(busy, 1),
            other_cpu_s=round(busy - (cpu or 0) - ((sim1 or 0) - (sim0 or 0)) - sum(cp_cpu.values()), 1),
            cp_peak_rss_mib={c: round(sampler.peak[c], 1) for c in ("kube-apiserver", "etcd")},
            reconciles=m.get("reconciles"), reconcile_seconds=round(m.get("reconcile_seconds", 0), 2),
            audit=audit, agent_audit=agent_audit, profile=self.profile(nodes, t0, t_done, self.max_unavailable(n)),
            timeline=[(round(t - t0, 2), u) for t, u in timeline],
        )
        log(f"[footprint {n}]   {actual:.1f}s, start-up {rec['startup_s']}s (caches synced {rec['synced_s']}s), "
            f"CPU {cpu:.1f}s, peak RSS {rec['operator_hwm_mib']} MiB, apiserver CPU {rec['cp_cpu_s']['kube-apiserver']}s; "
            f"writes per node updated: winpool {writes(audit) / target:.2f}, agents {writes(agent_audit) / target:.2f}; "
            f"fleet CPU {rec['sim_cpu_s']}s, VmHWM {rec['sim_hwm_mib']} MiB")


def machine_info(repo):
    info = {"nproc": os.cpu_count()}
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    info["kernel"] = os.uname().release
    return info


def go_version():
    """What hack/sim.sh builds the fleet and its agents with."""
    return subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()


def versions(repo, binary):
    # cargo's layout names the profile: a debug binary measured by hand (WINPOOL_BENCH_BIN) must not read as release.
    v = {"profile": "debug" if f"{os.sep}debug{os.sep}" in os.path.abspath(binary) else "release"}
    v["rustc"] = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    v["go"] = go_version()
    if os.environ.get("WINPOOL_BENCH_REV"):
        # The binary was built elsewhere (WINPOOL_BENCH_BIN) from this revision.
        v["winpool"] = os.environ["WINPOOL_BENCH_REV"]
        return v
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    # The fleet runs the agent built from this tree (hack/sim.sh), so its changes count too.
    dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock", "agent"],
                           capture_output=True, text=True).stdout.strip()
    v["winpool"] = sha + ("+uncommitted src/agent changes" if dirty else "")
    v["winpool_binary"] = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--helm", required=True)
    ap.add_argument("--cluster-script", required=True)
    ap.add_argument("--sim-script", required=True)
    ap.add_argument("--agent-identity-script", required=True)
    ap.add_argument("--mode", choices=["full", "quick", "smoke"], default="full")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--phases", default="rollout,footprint")
    ap.add_argument("--compliance-nodes", type=int, default=5000)
    ap.add_argument("--rollout-sizes")
    ap.add_argument("--footprint-sizes")
    ap.add_argument("--services", type=int)
    ap.add_argument("--endpoints", type=int)
    ap.add_argument("--fraction", type=float, help="footprint runs stop at this fraction of the nodes updated")
    ap.add_argument("--churn-nodes", type=int, help="the churn phase's pool size")
    ap.add_argument("--churn-seconds", type=float, help="how long the churn phase changes endpoints")
    ap.add_argument("--whole", choices=["yes", "no"], help="one whole rollout at the largest footprint size")
    ap.add_argument("--max-unavailable", help="the pools' rollout.maxUnavailable (default 10%%)")
    ap.add_argument("--staging-nodes", type=int, help="the staging phase's pool size")
    ap.add_argument("--hotpatch-nodes", type=int, help="the hotpatch phase's pool size")
    ap.add_argument("--hotpatch-pods-per-node", type=int, help="the hotpatch phase's pods per node")
    ap.add_argument("--hns-nodes", type=int, help="the hns phase's pool size, per release")
    ap.add_argument("--hns-services", type=int, help="the hns phase's Services")
    ap.add_argument("--hns-pods-per-node", type=int, help="the hns phase's pods per node behind the Services")
    ap.add_argument("--hns-releases", help="the hns phase's Windows Server releases, e.g. ltsc2019,ltsc2022")
    ap.add_argument("--out")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args()

    # Sizes and timings per mode; flags override.
    modes = {
        "full": dict(runs=3, warmup=1, rollout_sizes=[100, 1000], footprint_sizes=[1000, 5000], services=10000, endpoints=50000,
                     apply_seconds=5.0, reboot_seconds=0.0, max_unavailable="10%", timeout=3600, stall=600, fraction=0.2, whole=True, churn_nodes=1000, churn_seconds=600,
                     hns_nodes=300, hns_services=2000, hns_pods_per_node=30, hns_releases="ltsc2019,ltsc2022", staging_nodes=40, hotpatch_nodes=10, hotpatch_pods_per_node=5),
        "smoke": dict(runs=1, warmup=0, rollout_sizes=[20], footprint_sizes=[20], services=20, endpoints=100,
                      apply_seconds=1.0, reboot_seconds=0.0, max_unavailable="25%", timeout=300, stall=60, fraction=1.0, whole=False, churn_nodes=20, churn_seconds=20,
                      hns_nodes=20, hns_services=20, hns_pods_per_node=2, hns_releases="ltsc2022", staging_nodes=8, hotpatch_nodes=4, hotpatch_pods_per_node=2),
    }
    # quick is full with one run, no warm-up and no whole rollout.
    modes["quick"] = dict(modes["full"], runs=1, warmup=0, whole=False)
    for k, v in modes[a.mode].items():
        cli = getattr(a, k, None)
        if cli is None:
            setattr(a, k, v)
        elif k.endswith("_sizes"):
            setattr(a, k, [int(x) for x in str(cli).split(",") if x])
        elif k == "whole":
            a.whole = cli == "yes"
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    b = Bench(a)
    if a.report_only:
        with open(b.results_path) as f:
            b.results = json.load(f)
        report.write(b.results, a.out)
        return
    b.results["mode"] = a.mode
    b.results["config"] = {k: getattr(a, k) for k in ("runs", "warmup", "rollout_sizes", "footprint_sizes", "services", "endpoints",
                                                       "apply_seconds", "reboot_seconds", "max_unavailable", "fraction", "whole")}
    b.results["machine"] = machine_info(a.repo)
    b.results["versions"] = versions(a.repo, a.bin)
    b.results["config"]["cp_api_qps"] = os.environ.get("WINPOOL_CP_API_QPS") or None
    if os.environ.get("WINPOOL_BENCH_OPERATOR_ENV"):
        b.results["config"]["operator_env"] = os.environ["WINPOOL_BENCH_OPERATOR_ENV"]
    started = time.time()
    # The report states when the runs were made, not when it was rendered (--report-only re-renders later).
    b.results["started_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    try:
        for phase in a.phases.split(","):
            t = time.time()
            getattr(b, f"phase_{phase}")()
            b.results["setup"][f"{phase}_phase_s"] = round(time.time() - t)
    finally:
        b.stop_all()
        b.results["setup"]["total_s"] = round(time.time() - started)
        b.save()
    report.write(b.results, a.out)


if __name__ == "__main__":
    main()
