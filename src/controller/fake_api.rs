//! The fake API server of the request-order tests (`fixtures.rs`): it keeps
//! the objects, applies each write the way the real one does (merge patch,
//! JSON patch, apply, create, delete, eviction) and answers as it would.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::api::WindowsNodePool;

/// One request the operator made, with the object it wrote to as it was before and after.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) query: String,
    pub(super) content_type: String,
    pub(super) body: Value,
    pub(super) before: Value,
    pub(super) after: Value,
}

impl Recorded {
    /// `VERB path` for sequence assertions, the verb as kubectl's audit shows it.
    pub(super) fn call(&self) -> String {
        let verb = match (self.method.as_str(), self.content_type.as_str()) {
            ("PATCH", ct) if ct.starts_with("application/apply-patch") => "APPLY",
            ("PATCH", _) => "PATCH",
            (m, _) => m,
        };
        format!("{verb} {}", self.path)
    }

    pub(super) fn is_write(&self) -> bool {
        self.method != "GET"
    }

    pub(super) fn query_has(&self, pair: &str) -> bool {
        self.query.split('&').any(|q| q == pair)
    }
}

/// What the fake API server holds.
#[derive(Default)]
pub(super) struct Cluster {
    pub(super) pool: Option<WindowsNodePool>,
    pub(super) nodes: BTreeMap<String, Value>,
    /// The agents' WindowsNodeReports, by node.
    pub(super) reports: BTreeMap<String, Value>,
    pub(super) daemonsets: BTreeMap<String, Value>,
    pub(super) configmaps: BTreeMap<String, Value>,
    /// The WindowsNodeOperations winpool wrote, by name.
    pub(super) operations: BTreeMap<String, Value>,
    pub(super) pods: BTreeMap<String, Value>,
    /// Pods a PodDisruptionBudget protects, by pod name: the budget's name.
    pub(super) budgets: BTreeMap<String, String>,
    pub(super) resource_version: u64,
    /// Requests the fake does not know: each fails its round's test.
    pub(super) unexpected: Vec<String>,
    /// The operator's stop flag, raised as the first node write arrives (the
    /// shutdown signal landing mid-round), when a test arms it.
    pub(super) stop_at_first_node_write: Option<Arc<AtomicBool>>,
    /// A node whose next write lands but whose answer is lost (the API server
    /// restarting as it answers).
    pub(super) lose_answer_to: Option<String>,
}

impl Cluster {
    pub(super) fn bump(&mut self, obj: &mut Value) {
        self.resource_version += 1;
        obj["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
    }

    /// Answer one request as the API server would: (status code, body, the object before, after).
    pub(super) fn serve(&mut self, method: &str, path: &str, query: &str, content_type: &str, body: &Value) -> (u16, Value, Value, Value) {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method, segs.as_slice()) {
            ("PATCH", ["api", "v1", "nodes", name] | ["api", "v1", "nodes", name, "status"]) => {
                if let Some(stop) = self.stop_at_first_node_write.take() {
                    stop.store(true, Ordering::Relaxed);
                }
                let Some(before) = self.nodes.get(*name).cloned() else {
                    return (404, not_found("nodes", name), Value::Null, Value::Null);
                };
                let mut after = before.clone();
                if content_type.starts_with("application/json-patch") {
                    let patch: json_patch::Patch = serde_json::from_value(body.clone()).expect("a JSON patch");
                    if json_patch::patch(&mut after, &patch).is_err() {
                        return (422, status_body(422, "Invalid", "the JSON patch does not apply"), before, Value::Null);
                    }
                } else if content_type.starts_with("application/strategic-merge-patch") {
                    // Node conditions merge by type (the patchMergeKey of NodeStatus.conditions).
                    let mut rest = body.clone();
                    let conditions = rest["status"].as_object_mut().and_then(|s| s.remove("conditions"));
                    json_patch::merge(&mut after, &rest);
                    for c in conditions.as_ref().and_then(Value::as_array).into_iter().flatten() {
                        let list = after["status"]["conditions"].as_array_mut().expect("a node has conditions");
                        match list.iter_mut().find(|old| old["type"] == c["type"]) {
                            Some(old) => *old = c.clone(),
                            None => list.push(c.clone()),
                        }
                    }
                } else {
                    // A merge patch that names a resourceVersion is guarded by it.
                    if let Some(rv) = body["metadata"]["resourceVersion"].as_str()
                        && Some(rv) != before["metadata"]["resourceVersion"].as_str()
                    {
                        return (409, status_body(409, "Conflict", "the object has been modified"), before, Value::Null);
                    }
                    json_patch::merge(&mut after, body);
                }
                self.bump(&mut after);
                self.nodes.insert(name.to_string(), after.clone());
                if segs.len() == 4 && self.lose_answer_to.take_if(|n| n == name).is_some() {
                    return (500, status_body(500, "InternalError", "the answer was lost"), before, after);
                }
                (200, after.clone(), before, after)
            }
            ("PATCH" | "PUT", ["apis", "apps", "v1", "namespaces", _, "daemonsets", name]) => {
                let before = self.daemonsets.get(*name).cloned().unwrap_or(Value::Null);
                let mut after = body.clone();
                self.bump(&mut after);
                self.daemonsets.insert(name.to_string(), after.clone());
                (200, after.clone(), before, after)
            }
            // A node's operations, listed by its name (a selectable field).
            ("GET", ["apis", "winpool.dev", "v1alpha1", "namespaces", _, "windowsnodeoperations"]) => {
                let node = query.split('&').find_map(|q| q.strip_prefix("fieldSelector=spec.nodeName%3D")).expect("listed by node");
                let items: Vec<Value> = self.operations.values().filter(|o| o["spec"]["nodeName"] == json!(node)).cloned().collect();
                (
                    200,
                    json!({ "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodeOperationList", "metadata": {}, "items": items }),
                    Value::Null,
                    Value::Null,
                )
            }
            ("GET", ["apis", "winpool.dev", "v1alpha1", "namespaces", _, "windowsnodeoperations", name]) => {
                match self.operations.get(*name) {
                    Some(o) => (200, o.clone(), Value::Null, Value::Null),
                    None => (404, not_found("windowsnodeoperations", name), Value::Null, Value::Null),
                }
            }
            ("POST", ["apis", "winpool.dev", "v1alpha1", "namespaces", _, "windowsnodeoperations"]) => {
                let name = body["metadata"]["name"].as_str().expect("a named operation").to_string();
                if self.operations.contains_key(&name) {
                    return (409, status_body(409, "AlreadyExists", "operation exists"), Value::Null, Value::Null);
                }
                let mut after = body.clone();
                self.bump(&mut after);
                self.operations.insert(name, after.clone());
                (201, after.clone(), Value::Null, after)
            }
            ("PATCH", ["apis", "winpool.dev", "v1alpha1", "namespaces", _, "windowsnodeoperations", name]) => {
                let Some(before) = self.operations.get(*name).cloned() else {
                    return (404, not_found("windowsnodeoperations", name), Value::Null, Value::Null);
                };
                let mut after = before.clone();
                json_patch::merge(&mut after, body);
                self.bump(&mut after);
                self.operations.insert(name.to_string(), after.clone());
                (200, after.clone(), before, after)
            }
            ("DELETE", ["apis", "apps", "v1", "namespaces", _, "daemonsets", name]) => {
                let before = self.daemonsets.remove(*name).unwrap_or(Value::Null);
                (200, status_body(200, "Success", "deleted"), before, Value::Null)
            }
            ("POST", ["api", "v1", "namespaces", _, "configmaps"]) => {
                let name = body["metadata"]["name"].as_str().expect("a named ConfigMap").to_string();
                if self.configmaps.contains_key(&name) {
                    return (409, status_body(409, "AlreadyExists", "configmap exists"), Value::Null, Value::Null);
                }
                let mut after = body.clone();
                self.bump(&mut after);
                self.configmaps.insert(name, after.clone());
                (201, after.clone(), Value::Null, after)
            }
            ("PATCH", ["api", "v1", "namespaces", _, "configmaps", name]) => {
                let Some(before) = self.configmaps.get(*name).cloned() else {
                    return (404, not_found("configmaps", name), Value::Null, Value::Null);
                };
                let mut after = before.clone();
                json_patch::merge(&mut after, body);
                self.bump(&mut after);
                self.configmaps.insert(name.to_string(), after.clone());
                (200, after.clone(), before, after)
            }
            ("DELETE", ["api", "v1", "namespaces", _, "configmaps", name]) => {
                let before = self.configmaps.remove(*name).unwrap_or(Value::Null);
                (200, status_body(200, "Success", "deleted"), before, Value::Null)
            }
            ("GET", ["api", "v1", "pods"]) if query.contains("labelSelector=") => {
                // A pod health gate: `key=value` selectors are all the tests use.
                let selector = query.split('&').find_map(|q| q.strip_prefix("labelSelector=")).unwrap_or_default().replace("%3D", "=");
                let (k, v) = selector.split_once('=').expect("an equality selector");
                let items: Vec<Value> = self.pods.values().filter(|p| p["metadata"]["labels"][k] == json!(v)).cloned().collect();
                (200, json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items }), Value::Null, Value::Null)
            }
            ("GET", ["api", "v1", "pods"]) => {
                let node = query
                    .split('&')
                    .find_map(|q| q.strip_prefix("fieldSelector=spec.nodeName%3D"))
                    .expect("pods are listed by node")
                    .to_string();
                let items: Vec<Value> = self.pods.values().filter(|p| p["spec"]["nodeName"] == json!(node)).cloned().collect();
                (200, json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items }), Value::Null, Value::Null)
            }
            ("POST", ["api", "v1", "namespaces", _, "pods", name, "eviction"]) if self.budgets.contains_key(*name) => {
                // What the API server answers when a budget allows no disruption.
                let mut refused = status_body(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.");
                let cause = format!("The disruption budget {} needs 1 healthy pods and has 1 currently", self.budgets[*name]);
                refused["details"] = json!({ "causes": [{ "reason": "DisruptionBudget", "message": cause }] });
                (429, refused, Value::Null, Value::Null)
            }
            ("POST", ["api", "v1", "namespaces", _, "pods", name, "eviction"]) => {
                let before = self.pods.remove(*name).unwrap_or(Value::Null);
                (201, status_body(201, "Success", "evicted"), before, Value::Null)
            }
            ("PATCH", ["apis", "winpool.dev", "v1alpha1", "windowsnodepools", _, "status"]) => {
                let pool = self.pool.as_mut().expect("the pool exists");
                let before = serde_json::to_value(&pool.status).unwrap();
                pool.status = Some(serde_json::from_value(body["status"].clone()).expect("a pool status"));
                let after = serde_json::to_value(&*pool).unwrap();
                (200, after.clone(), before, after)
            }
            // A merge patch of the pool's metadata (its claim), guarded by its resourceVersion.
            ("PATCH", ["apis", "winpool.dev", "v1alpha1", "windowsnodepools", _]) => {
                let pool = self.pool.as_mut().expect("the pool exists");
                let before = serde_json::to_value(&*pool).unwrap();
                let guard = body["metadata"]["resourceVersion"].as_str();
                if guard.is_some() && guard != pool.metadata.resource_version.as_deref() {
                    return (409, status_body(409, "Conflict", "the object has been modified"), before, Value::Null);
                }
                let annotations = pool.metadata.annotations.get_or_insert_with(Default::default);
                for (k, v) in body["metadata"]["annotations"].as_object().into_iter().flatten() {
                    annotations.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
                }
                let after = serde_json::to_value(&*pool).unwrap();
                (200, after.clone(), before, after)
            }
            ("POST", ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]) => (201, body.clone(), Value::Null, body.clone()),
            // kube's recorder bumps the count of a series it has seen.
            ("PATCH", ["apis", "events.k8s.io", "v1", "namespaces", _, "events", _]) => (200, body.clone(), Value::Null, body.clone()),
            _ => {
                self.unexpected.push(format!("{method} {path}?{query}"));
                (500, status_body(500, "InternalError", "no round should make this request"), Value::Null, Value::Null)
            }
        }
    }
}

fn not_found(kind: &str, name: &str) -> Value {
    status_body(404, "NotFound", &format!("{kind} {name:?} not found"))
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    let status = if code < 300 { "Success" } else { "Failure" };
    json!({ "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": status, "reason": reason, "message": message, "code": code })
}
