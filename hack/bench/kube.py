"""A minimal Kubernetes API client on the Python standard library, for the
benchmark's own traffic (creating Services and EndpointSlices in bulk, watching
a pool's status). It authenticates with the admin kubeconfig of the local
control plane, so none of its requests is counted as winpool's.
"""

import http.client
import json
import ssl
import subprocess
import threading
import time
import urllib.parse


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:300]!r}")
        self.status = status
        self.body = body


class Kube:
    def __init__(self, kubectl, kubeconfig):
        cfg = json.loads(
            subprocess.check_output([kubectl, "--kubeconfig", kubeconfig, "config", "view", "--raw", "--minify", "-o", "json"])
        )
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        self.ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
        if "client-certificate" in user:
            self.ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.token = user.get("token")
        self.local = threading.local()

    def _conn(self, timeout=60):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
            self.local.conn = c
        return c

    def _headers(self, ctype):
        h = {"Accept": "application/json", "User-Agent": "winpool-bench"}
        if ctype:
            h["Content-Type"] = ctype
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def request(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(5):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers=self._headers(ctype if data else None))
                r = c.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                c.close()
                self.local.conn = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if (r.status == 429 or r.status >= 500) and attempt < 4:
                time.sleep(0.5 * (attempt + 1))
                continue
            if r.status not in ok:
                raise ApiError(r.status, raw.decode(errors="replace"))
            return json.loads(raw) if raw else None
        raise ApiError(0, f"{method} {path}: connection failed")

    def get(self, path):
        return self.request("GET", path)

    def create(self, path, obj):
        """POST; an object that already exists is fine (the benchmark may be resumed)."""
        return self.request("POST", path, obj, ok=(200, 201, 409))

    def merge_patch(self, path, patch):
        return self.request("PATCH", path, patch, ctype="application/merge-patch+json")

    def list_all(self, path, **params):
        items, cont = [], None
        while True:
            q = dict(params, limit=1000)
            if cont:
                q["continue"] = cont
            page = self.get(f"{path}?{urllib.parse.urlencode(q)}")
            items.extend(page.get("items", []))
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                return items

    def watch(self, path, resource_version, timeout=3600, **params):
        """Yield watch events (dicts) until the server closes the stream."""
        q = dict(params, watch="1", resourceVersion=resource_version, timeoutSeconds=str(timeout), allowWatchBookmarks="false")
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout + 30)
        try:
            c.request("GET", f"{path}?{urllib.parse.urlencode(q)}", headers=self._headers(None))
            r = c.getresponse()
            if r.status != 200:
                raise ApiError(r.status, r.read().decode(errors="replace"))
            while True:
                line = r.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            c.close()


def create_many(kube, items, threads=6):
    """POST every (path, object) with a few parallel connections. Returns the seconds it took."""
    start = time.monotonic()
    lock = threading.Lock()
    it = iter(items)
    errors = []

    def worker():
        while True:
            with lock:
                nxt = next(it, None)
            if nxt is None:
                return
            try:
                kube.create(*nxt)
            except ApiError as e:
                errors.append(e)
                return

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - start
