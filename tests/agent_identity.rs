//! The agent's identity, as the chart installs it, against the real API server:
//! a token bound to the agent pod on node A may write winpool's agent
//! annotations on A and nothing else: not another node, not A's labels, spec,
//! taints, finalizers or any other annotation. The refusals come from the
//! chart's ValidatingAdmissionPolicy (RBAC alone allows them all, which the
//! test shows at the end by removing the policy's binding).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ServiceAccount, Toleration};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{TestSpace, client_with_token, install_agent_identity, kubeconfig, remove_agent_identity, wait_for};

const WAIT: Duration = Duration::from_secs(60);
const NODE_NAME_CLAIM: &str = "authentication.kubernetes.io/node-name";

/// What SPEC §2 lets the agent write, and only that.
const AGENT_ANNOTATIONS: [&str; 12] = [
    "winpool.dev/applied-revision",
    "winpool.dev/apply-status",
    "winpool.dev/apply-message",
    "winpool.dev/agent-version",
    "winpool.dev/csi-proxy-version",
    "winpool.dev/cni-mode",
    "winpool.dev/runtime-service",
    "winpool.dev/csi-proxy-host",
    "winpool.dev/preflight",
    "winpool.dev/preflight-revision",
    "winpool.dev/hns-load-balancers",
    "winpool.dev/hns-endpoints",
];

/// The release name hack/agent-identity.sh derives from the namespace, which
/// names the cluster-scoped objects.
fn policy_name(agent_ns: &str) -> String {
    format!("winpool-{agent_ns}-agent-own-node")
}

/// A Node the test owns (no kubelet, no kwok): only its metadata and spec matter.
fn plain_node(t: &TestSpace, name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(t.node_labels().into_iter().chain([("kubernetes.io/os".to_string(), "windows".to_string())]).collect()),
            // The operator's own per-node state: the agent must not be able to forge it.
            annotations: Some([("winpool.dev/state".to_string(), "Pending".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The agent pod on `node`. It never runs (no kubelet); it only has to exist and be
/// bound to the node for the API server to put the node in its tokens.
fn agent_pod(node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some("winpool-agent-test".into()), ..Default::default() },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            service_account_name: Some("winpool-agent".into()),
            automount_service_account_token: Some(false),
            // The node has no kubelet: the node lifecycle controller taints it
            // unreachable, which must not evict the pod (and so void its token).
            tolerations: Some(vec![Toleration { operator: Some("Exists".into()), ..Default::default() }]),
            containers: vec![Container { name: "agent".into(), image: Some("ghcr.io/winpool/agent:test".into()), ..Default::default() }],
            ..Default::default()
        }),
        status: None,
    }
}

async fn token(sa: &Api<ServiceAccount>, bound_to: Option<&Pod>) -> String {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            // None: the API server's own audience.
            audiences: None,
            expiration_seconds: Some(3600),
            bound_object_ref: bound_to.map(|p| BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: p.metadata.name.clone(),
                uid: p.metadata.uid.clone(),
            }),
        }),
        ..Default::default()
    };
    let issued = sa.create_token_request("winpool-agent", &PostParams::default(), &request).await.expect("token request");
    issued.status.and_then(|s| s.token).expect("a token in the TokenRequest's status")
}

/// Who the API server takes `client` for, and the nodes named in its token.
async fn whoami(client: &Client) -> (String, Vec<String>) {
    let review: Api<SelfSubjectReview> = Api::all(client.clone());
    let r = review.create(&PostParams::default(), &SelfSubjectReview::default()).await.expect("self subject review");
    let user = r.status.and_then(|s| s.user_info).expect("user info");
    let nodes = user.extra.and_then(|mut e| e.remove(NODE_NAME_CLAIM)).unwrap_or_default();
    (user.username.unwrap_or_default(), nodes)
}

async fn merge(nodes: &Api<Node>, node: &str, patch: &Value) -> Result<Node, kube::Error> {
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(patch)).await
}

/// The patch must be refused by the policy (403, the policy named) with a message
/// containing every part of `rule`.
async fn refused(nodes: &Api<Node>, policy: &str, node: &str, patch: Value, rule: &[String]) {
    match merge(nodes, node, &patch).await {
        Ok(_) => panic!("the agent was allowed to patch node {node} with {patch}"),
        Err(kube::Error::Api(s)) => {
            eprintln!("refused as expected: {}", s.message);
            assert_eq!(s.code, 403, "patch {patch} of {node}: want 403 from the policy, got {s:?}");
            assert!(
                s.message.contains(&format!("ValidatingAdmissionPolicy '{policy}'")) && rule.iter().all(|r| s.message.contains(r)),
                "patch {patch} of {node}: refused, but not by {policy} for {rule:?}: {}",
                s.message
            );
        }
        Err(e) => panic!("patch {patch} of {node}: {e}"),
    }
}

fn annotations(n: &Node) -> BTreeMap<String, String> {
    n.metadata.annotations.clone().unwrap_or_default()
}

/// The cluster-scoped half of the identity outlives the test's namespaces; this
/// removes it however the test ends.
struct Identity(String);

impl Drop for Identity {
    fn drop(&mut self) {
        remove_agent_identity(&kubeconfig(), &self.0);
    }
}

#[tokio::test]
async fn an_agent_may_write_only_its_own_nodes_agent_annotations() {
    let t = TestSpace::new("agent-identity").await;
    let agent_ns = t.agent_namespace();
    let policy = policy_name(&agent_ns);
    install_agent_identity(&kubeconfig(), &agent_ns);
    let identity = Identity(agent_ns.clone());

    let admin_nodes: Api<Node> = Api::all(t.client.clone());
    let (a, b) = (format!("{}a", t.node_prefix()), format!("{}b", t.node_prefix()));
    for n in [&a, &b] {
        admin_nodes.create(&PostParams::default(), &plain_node(&t, n)).await.expect("node");
    }
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &agent_ns);
    let pod = pods.create(&PostParams::default(), &agent_pod(&a)).await.expect("agent pod");
    let pod_name = pod.metadata.name.clone().expect("pod name");
    let sa: Api<ServiceAccount> = Api::namespaced(t.client.clone(), &agent_ns);

    let agent = client_with_token(&kubeconfig(), &token(&sa, Some(&pod)).await).await;
    let (user, token_nodes) = whoami(&agent).await;
    assert_eq!(user, format!("system:serviceaccount:{agent_ns}:winpool-agent"), "the agent client authenticates as the ServiceAccount");
    assert_eq!(token_nodes, vec![a.clone()], "a token bound to the pod on {a} names {a} in {NODE_NAME_CLAIM}");
    let nodes: Api<Node> = Api::all(agent.clone());

    // The API server type-checks the policy against the Node schema; an
    // expression it cannot check would fail every agent request at runtime.
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(t.client.clone());
    let what = format!("the type check of ValidatingAdmissionPolicy {policy} (named by hack/agent-identity.sh)");
    let warnings = wait_for(&what, WAIT, || async {
        let p = vaps.get(&policy).await.ok()?;
        let st = p.status?;
        (st.observed_generation? == p.metadata.generation?)
            .then(|| st.type_checking.and_then(|tc| tc.expression_warnings).unwrap_or_default())
    })
    .await;
    assert!(warnings.is_empty(), "the policy's expressions type-check cleanly: {warnings:?}");

    // A new policy takes effect once the API server has loaded it and its
    // binding; until then RBAC alone decides and this patch goes through (or,
    // while the new RBAC propagates, RBAC refuses it).
    let mut attempt = 0;
    let by_policy = format!("ValidatingAdmissionPolicy '{policy}'");
    wait_for("the policy to refuse the agent's write to another node", WAIT, || {
        attempt += 1;
        let patch = json!({"metadata": {"annotations": {"winpool.dev/apply-message": format!("attempt {attempt}")}}});
        let (nodes, b, by_policy) = (nodes.clone(), b.clone(), by_policy.clone());
        async move {
            matches!(merge(&nodes, &b, &patch).await, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(&by_policy))
                .then_some(())
        }
    })
    .await;

    let own_node_only = format!("winpool agents may change only their own Node: this token is bound to a pod on node {a}, not on {b}");
    let labels_of = |key: &str| format!("winpool agents may not change Node labels; this request changes {key}");
    let cases: Vec<(&str, &String, Value, Vec<String>)> = vec![
        (
            "(a) another node, even an agent annotation",
            &b,
            json!({"metadata": {"annotations": {"winpool.dev/apply-status": "Applying"}}}),
            vec![own_node_only.clone()],
        ),
        (
            "(b) a label of its own node: the rollout's own",
            &a,
            json!({"metadata": {"labels": {"winpool.dev/revision": "forged"}}}),
            vec![labels_of("winpool.dev/revision")],
        ),
        (
            "(b) removing a label of its own node",
            &a,
            json!({"metadata": {"labels": {support::TEST_LABEL: null}}}),
            vec![labels_of(support::TEST_LABEL)],
        ),
        (
            "(c) cordoning its own node",
            &a,
            json!({"spec": {"unschedulable": true}}),
            vec!["winpool agents may not change a Node's spec: spec.unschedulable".into()],
        ),
        (
            "(c) tainting its own node",
            &a,
            json!({"spec": {"taints": [{"key": "example.com/agent", "effect": "NoSchedule"}]}}),
            vec!["winpool agents may not change a Node's spec: spec.taints".into()],
        ),
        (
            "(d) someone else's annotation",
            &a,
            json!({"metadata": {"annotations": {"example.com/x": "1"}}}),
            vec![
                "winpool agents may change only winpool's agent annotations on a Node".into(),
                "this request changes example.com/x".into(),
            ],
        ),
        (
            "(d) the operator's annotation",
            &a,
            json!({"metadata": {"annotations": {"winpool.dev/state": "Updated"}}}),
            vec!["winpool agents may change only winpool's agent annotations".into(), "this request changes winpool.dev/state".into()],
        ),
        (
            "(d) removing the operator's annotation",
            &a,
            json!({"metadata": {"annotations": {"winpool.dev/state": null}}}),
            vec!["this request changes winpool.dev/state".into()],
        ),
        (
            // One foreign key spoils the whole patch: nothing of it is written.
            "(d) an agent annotation with a foreign one",
            &a,
            json!({"metadata": {"annotations": {"winpool.dev/apply-status": "Succeeded", "winpool.dev/state": "Updated"}}}),
            vec!["this request changes winpool.dev/state".into()],
        ),
        (
            "(e) a finalizer, which would hold the node's deletion",
            &a,
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
            vec!["winpool agents may not change a Node's ownerReferences or finalizers".into()],
        ),
    ];
    for (what, node, patch, rule) in cases {
        eprintln!("refusal: {what}");
        refused(&nodes, &policy, node, patch, &rule).await;
    }

    let node_a = admin_nodes.get(&a).await.unwrap();
    let labels = node_a.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key("winpool.dev/revision") && labels.contains_key(support::TEST_LABEL), "labels unchanged: {labels:?}");
    assert_eq!(node_a.spec.as_ref().and_then(|s| s.unschedulable), None, "not cordoned");
    assert!(
        !node_a.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default().iter().any(|t| t.key == "example.com/agent"),
        "no taint of the agent's"
    );
    assert!(node_a.metadata.finalizers.is_none(), "no finalizer");
    let ann = annotations(&node_a);
    assert_eq!(ann.get("winpool.dev/state").map(String::as_str), Some("Pending"), "the operator's annotation is untouched");
    assert!(
        !ann.contains_key("example.com/x") && !ann.contains_key("winpool.dev/apply-status"),
        "no refused annotation was written: {ann:?}"
    );

    // What the agent is for: every agent annotation on its own node, written and removed.
    let report: serde_json::Map<String, Value> = AGENT_ANNOTATIONS
        .iter()
        .map(|k| (k.to_string(), json!(if *k == "winpool.dev/hns-endpoints" { "3" } else { "Applying" })))
        .collect();
    merge(&nodes, &a, &json!({"metadata": {"annotations": report}})).await.expect("the agent reports on its own node");
    let ann = annotations(&admin_nodes.get(&a).await.unwrap());
    for k in AGENT_ANNOTATIONS {
        assert!(ann.contains_key(k), "{k} written: {ann:?}");
    }
    assert_eq!(ann["winpool.dev/hns-endpoints"], "3");
    let clear: serde_json::Map<String, Value> = AGENT_ANNOTATIONS.iter().map(|k| (k.to_string(), Value::Null)).collect();
    merge(&nodes, &a, &json!({"metadata": {"annotations": clear}})).await.expect("the agent removes its own annotations");
    let ann = annotations(&admin_nodes.get(&a).await.unwrap());
    assert!(AGENT_ANNOTATIONS.iter().all(|k| !ann.contains_key(*k)), "agent annotations removed: {ann:?}");
    assert_eq!(ann.get("winpool.dev/state").map(String::as_str), Some("Pending"));

    // The policy only sees updates: creating a Node (which a server-side apply
    // of a missing one would do) and deleting one are RBAC's to refuse.
    let forged = format!("{}c", t.node_prefix());
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": forged}});
    let apply = nodes.patch(&forged, &PatchParams::apply("winpool-agent"), &Patch::Apply(&body)).await;
    assert!(matches!(&apply, Err(kube::Error::Api(s)) if s.code == 403), "the agent cannot create a node by apply: {apply:?}");
    let delete = nodes.delete(&a, &DeleteParams::default()).await;
    assert!(matches!(&delete, Err(kube::Error::Api(s)) if s.code == 403), "the agent cannot delete its node: {delete:?}");
    assert!(admin_nodes.get_opt(&forged).await.unwrap().is_none() && admin_nodes.get_opt(&a).await.unwrap().is_some());

    // A token of the same ServiceAccount that is not bound to a pod names no
    // node, so it cannot write even its agent annotations anywhere.
    let unbound = client_with_token(&kubeconfig(), &token(&sa, None).await).await;
    assert_eq!(whoami(&unbound).await.1, Vec::<String>::new(), "an unbound token carries no {NODE_NAME_CLAIM}");
    refused(
        &Api::all(unbound),
        &policy,
        &a,
        json!({"metadata": {"annotations": {"winpool.dev/apply-status": "Applying"}}}),
        &["winpool agents may change only their own Node, and this token names no node".to_string()],
    )
    .await;

    // Without the binding, RBAC alone lets the agent relabel its node: the
    // policy, not RBAC, is what stopped it above.
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(t.client.clone());
    bindings.delete(&policy, &DeleteParams::default()).await.expect("delete the policy binding");
    wait_for("RBAC alone to allow the agent to relabel its node", WAIT, || async {
        merge(&nodes, &a, &json!({"metadata": {"labels": {"winpool.dev/revision": "forged"}}})).await.ok()
    })
    .await;

    // No kubelet will confirm the pod's termination; only a deletion without
    // grace removes it, and with it the namespace.
    pods.delete(&pod_name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete the agent pod");
    drop(identity);
    t.cleanup().await;
}
