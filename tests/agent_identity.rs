//! The agent's identity, as the chart installs it, against the real API server:
//! a token bound to the agent pod on node A may write A's WindowsNodeReport,
//! owned by A, and nothing else: not another node's report, not a report owned
//! by anything else, and no Node at all. The report refusals come from the
//! chart's ValidatingAdmissionPolicy (RBAC alone allows them, which the test
//! shows at the end by removing the policy's binding); the Node ones from RBAC.
//! A Node deleted takes its report with it (the garbage collector, through the
//! owner reference).

use crate::support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ServiceAccount, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{TestSpace, client_with_token, install_agent_identity, install_crd, kubeconfig, remove_agent_identity, wait_for};
use winpool::api::report::{ApplyReport, ApplyStatus, WindowsNodeReport, WindowsNodeReportStatus};

const WAIT: Duration = Duration::from_secs(60);
const NODE_NAME_CLAIM: &str = "authentication.kubernetes.io/node-name";

/// The release name hack/agent-identity.sh derives from the namespace, which
/// names the cluster-scoped objects.
fn policy_name(agent_ns: &str) -> String {
    format!("winpool-{agent_ns}-agent-own-report")
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

fn owner(node: &Node) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// The report named `name`, as an agent writes it, owned by `owners`.
fn report(name: &str, owners: Vec<OwnerReference>, status: ApplyStatus) -> WindowsNodeReport {
    let mut r = WindowsNodeReport::reported(
        name,
        WindowsNodeReportStatus {
            agent_version: Some("test".into()),
            apply: Some(ApplyReport {
                revision: "r1".into(),
                status,
                message: None,
                started_at: None,
                heartbeat: None,
                result_code: None,
                no_reboot: false,
                installed: vec![],
                host_build: None,
            }),
            ..Default::default()
        },
    );
    r.metadata.owner_references = Some(owners);
    r
}

/// What the agent is for: its own report, created and then its status
/// written (the API server keeps no status from a create); and not another
/// node's report's status: RBAC lets the agent write the status subresource,
/// and the policy (`by_policy`) holds it to its own node there too.
async fn own_status_only(
    (reports, admin_reports): (&Api<WindowsNodeReport>, &Api<WindowsNodeReport>),
    (node_a, node_b): (&Node, &Node),
    by_policy: &str,
) {
    let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    let (a, b) = (name(node_a), name(node_b));
    reports
        .create(&PostParams::default(), &report(&a, vec![owner(node_a)], ApplyStatus::Applying))
        .await
        .expect("the agent creates its own report");
    let patched = reports
        .patch_status(&a, &PatchParams::default(), &status_write("Succeeded"))
        .await
        .expect("the agent writes its own report's status");
    assert_eq!(patched.status.and_then(|s| s.apply).map(|a| a.status), Some(ApplyStatus::Succeeded));
    admin_reports
        .create(&PostParams::default(), &report(&b, vec![owner(node_b)], ApplyStatus::Applying))
        .await
        .expect("an admin creates b's report");
    let r = reports.patch_status(&b, &PatchParams::default(), &status_write("Failed")).await;
    assert!(
        matches!(&r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(by_policy)),
        "the agent may not write another node's report status: {r:?}"
    );
    admin_reports.delete(&b, &DeleteParams::default()).await.expect("b's report deleted");
}

/// The agent's write of its report's status, as it sends it: a JSON patch
/// of the status subresource setting `/status`.
fn status_write(apply_status: &str) -> Patch<()> {
    let ops =
        json!([{"op": "add", "path": "/status", "value": {"agentVersion": "test", "apply": {"revision": "r1", "status": apply_status}}}]);
    Patch::Json(serde_json::from_value(ops).unwrap())
}

/// The create must be refused by the policy (403, the policy named) with a
/// message containing every part of `rule`.
async fn refused(reports: &Api<WindowsNodeReport>, policy: &str, r: &WindowsNodeReport, rule: &[String]) {
    let name = r.metadata.name.clone().unwrap_or_default();
    match reports.create(&PostParams::default(), r).await {
        Ok(_) => panic!("the agent was allowed to create report {name}: {:?}", r.metadata),
        Err(kube::Error::Api(s)) => {
            eprintln!("refused as expected: {}", s.message);
            assert_eq!(s.code, 403, "report {name}: want 403 from the policy, got {s:?}");
            assert!(
                s.message.contains(&format!("ValidatingAdmissionPolicy '{policy}'")) && rule.iter().all(|r| s.message.contains(r)),
                "report {name}: refused, but not by {policy} for {rule:?}: {}",
                s.message
            );
        }
        Err(e) => panic!("report {name}: {e}"),
    }
}

fn forbidden<T: std::fmt::Debug>(r: &Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(s)) if s.code == 403)
}

/// The cluster-scoped half of the identity outlives the test's namespaces; this
/// removes it however the test ends.
struct Identity(String);

impl Drop for Identity {
    fn drop(&mut self) {
        remove_agent_identity(&kubeconfig(), &self.0);
    }
}

/// RBAC: no Node write of any kind, its own included; no report deleted.
async fn assert_no_node_write_nor_report_delete(t: &TestSpace, agent: &kube::Client, a: &str) {
    let admin_nodes: Api<Node> = Api::all(t.client.clone());
    let reports: Api<WindowsNodeReport> = Api::namespaced(agent.clone(), &t.agent_namespace());
    let nodes: Api<Node> = Api::all(agent.clone());
    let annotate = json!({"metadata": {"annotations": {"winpool.dev/apply-status": "Applying"}}});
    let r = nodes.patch(a, &PatchParams::default(), &Patch::Merge(&annotate)).await;
    assert!(forbidden(&r), "the agent may not write its own Node: {r:?}");
    let r = nodes.patch_status(a, &PatchParams::default(), &Patch::Merge(&json!({"status": {"phase": "x"}}))).await;
    assert!(forbidden(&r), "nor its status: {r:?}");
    let forged = format!("{}c", t.node_prefix());
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": forged}});
    let apply = nodes.patch(&forged, &PatchParams::apply("winpool-agent"), &Patch::Apply(&body)).await;
    assert!(forbidden(&apply), "the agent cannot create a node by apply: {apply:?}");
    let delete = nodes.delete(a, &DeleteParams::default()).await;
    assert!(forbidden(&delete), "the agent cannot delete its node: {delete:?}");
    let delete = reports.delete(a, &DeleteParams::default()).await;
    assert!(forbidden(&delete), "the agent cannot delete its report: {delete:?}");
    let node = admin_nodes.get(a).await.unwrap();
    assert_eq!(
        node.metadata.annotations.unwrap_or_default().get("winpool.dev/state").map(String::as_str),
        Some("Pending"),
        "the Node is untouched"
    );
}

/// Events: only about its own Node (the second policy; RBAC allows any).
async fn agent_events_only_about_its_own_node(agent: &kube::Client, agent_ns: &str, a: &str, b: &str) {
    let events_policy = format!("winpool-{agent_ns}-agent-own-events");
    let by_events_policy = format!("ValidatingAdmissionPolicy '{events_policy}'");
    // A Node's Events live in "default" (the API server refuses them elsewhere).
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(agent.clone(), "default");
    let event_about = |node: &str, n: usize| k8s_openapi::api::core::v1::Event {
        metadata: ObjectMeta { name: Some(format!("{node}.agent-test-{n}")), ..Default::default() },
        involved_object: k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
        reason: Some("ApplyFailed".into()),
        message: Some("test".into()),
        type_: Some("Warning".into()),
        // As the agent writes them (agent/internal/agent/events.go): a reporting
        // controller lets a namespaced Event be about a cluster-scoped Node.
        reporting_component: Some("winpool.dev/agent".into()),
        reporting_instance: Some(format!("winpool-agent-{node}")),
        count: Some(1),
        first_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now())),
        last_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now())),
        ..Default::default()
    };
    let mut n = 0;
    let refusal = wait_for("the events policy to refuse an Event about another node", WAIT, || {
        n += 1;
        let ev = event_about(b, n);
        let events = events.clone();
        let by = by_events_policy.clone();
        async move {
            match events.create(&PostParams::default(), &ev).await {
                Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(&by) => Some(s.message),
                _ => None,
            }
        }
    })
    .await;
    assert!(refusal.contains(&format!("this token is bound to a pod on node {a}, the Event is about Node {b}")), "{refusal}");
    events.create(&PostParams::default(), &event_about(a, 0)).await.expect("the agent records an Event about its own node");
    let new_events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(agent.clone(), "default");
    let regarding_b = k8s_openapi::api::events::v1::Event {
        metadata: ObjectMeta { name: Some(format!("{b}.agent-test-new")), ..Default::default() },
        regarding: Some(k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(b.to_string()),
            ..Default::default()
        }),
        reason: Some("ApplyFailed".into()),
        action: Some("Apply".into()),
        reporting_controller: Some("winpool.dev/agent".into()),
        reporting_instance: Some("test".into()),
        event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now())),
        type_: Some("Warning".into()),
        ..Default::default()
    };
    let r = new_events.create(&PostParams::default(), &regarding_b).await;
    assert!(forbidden(&r), "nor through events.k8s.io about another node: {r:?}");
}

#[tokio::test]
async fn an_agent_may_write_only_its_own_nodes_report_and_no_node() {
    let client = support::client().await;
    install_crd(&client).await;
    let t = TestSpace::new("agent-identity").await;
    let agent_ns = t.agent_namespace();
    let policy = policy_name(&agent_ns);
    install_agent_identity(&kubeconfig(), &agent_ns);
    let identity = Identity(agent_ns.clone());

    let admin_nodes: Api<Node> = Api::all(t.client.clone());
    let (a, b) = (format!("{}a", t.node_prefix()), format!("{}b", t.node_prefix()));
    let mut created = Vec::new();
    for n in [&a, &b] {
        created.push(admin_nodes.create(&PostParams::default(), &plain_node(&t, n)).await.expect("node"));
    }
    let (node_a, node_b) = (&created[0], &created[1]);
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &agent_ns);
    let pod = pods.create(&PostParams::default(), &agent_pod(&a)).await.expect("agent pod");
    let pod_name = pod.metadata.name.clone().expect("pod name");
    let sa: Api<ServiceAccount> = Api::namespaced(t.client.clone(), &agent_ns);

    let agent = client_with_token(&kubeconfig(), &token(&sa, Some(&pod)).await).await;
    let (user, token_nodes) = whoami(&agent).await;
    assert_eq!(user, format!("system:serviceaccount:{agent_ns}:winpool-agent"), "the agent client authenticates as the ServiceAccount");
    assert_eq!(token_nodes, vec![a.clone()], "a token bound to the pod on {a} names {a} in {NODE_NAME_CLAIM}");
    let reports: Api<WindowsNodeReport> = Api::namespaced(agent.clone(), &agent_ns);
    let admin_reports: Api<WindowsNodeReport> = Api::namespaced(t.client.clone(), &agent_ns);

    // The API server type-checks the policy against the report's schema; an
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
    // binding; until then RBAC alone decides and this write goes through (or,
    // while the new RBAC propagates, RBAC refuses it).
    let by_policy = format!("ValidatingAdmissionPolicy '{policy}'");
    wait_for("the policy to refuse the agent's report of another node", WAIT, || async {
        match reports.create(&PostParams::default(), &report(&b, vec![owner(node_b)], ApplyStatus::Applying)).await {
            Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(&by_policy) => Some(()),
            Ok(_) => {
                let _ = admin_reports.delete(&b, &DeleteParams::default()).await;
                None
            }
            Err(_) => None,
        }
    })
    .await;

    let own_report_only =
        format!("winpool agents may write only their own node's report: this token is bound to a pod on node {a}, not on {b}");
    let owned = "a winpool agent's report must be owned by its Node alone".to_string();
    let mut with_finalizer = report(&a, vec![owner(node_a)], ApplyStatus::Applying);
    with_finalizer.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let cases: Vec<(&str, WindowsNodeReport, Vec<String>)> = vec![
        ("(a) another node's report", report(&b, vec![owner(node_b)], ApplyStatus::Applying), vec![own_report_only.clone()]),
        (
            "(a) another node's report, owned by the agent's own",
            report(&b, vec![owner(node_a)], ApplyStatus::Applying),
            vec![own_report_only],
        ),
        ("(b) its own report, owned by nothing", report(&a, vec![], ApplyStatus::Applying), vec![owned.clone()]),
        ("(b) its own report, owned by another node", report(&a, vec![owner(node_b)], ApplyStatus::Applying), vec![owned.clone()]),
        (
            "(b) its own report, owned by its node and another",
            report(&a, vec![owner(node_a), owner(node_b)], ApplyStatus::Applying),
            vec![owned.clone()],
        ),
        ("(b) its own report, with a finalizer", with_finalizer, vec![owned]),
    ];
    for (what, r, rule) in cases {
        eprintln!("refusal: {what}");
        refused(&reports, &policy, &r, &rule).await;
    }
    assert!(admin_reports.get_opt(&b).await.unwrap().is_none(), "no report of {b} was written");

    own_status_only((&reports, &admin_reports), (node_a, node_b), &by_policy).await;
    // Nor can it take the owner reference away afterwards.
    let disown = json!({"metadata": {"ownerReferences": null}});
    let r = reports.patch(&a, &PatchParams::default(), &Patch::Merge(&disown)).await;
    assert!(forbidden(&r), "the agent may not disown its report: {r:?}");

    assert_no_node_write_nor_report_delete(&t, &agent, &a).await;

    // A token of the same ServiceAccount that is not bound to a pod names no
    // node, so it cannot write even its own node's report.
    let unbound = client_with_token(&kubeconfig(), &token(&sa, None).await).await;
    assert_eq!(whoami(&unbound).await.1, Vec::<String>::new(), "an unbound token carries no {NODE_NAME_CLAIM}");
    let unbound_reports: Api<WindowsNodeReport> = Api::namespaced(unbound, &agent_ns);
    refused(
        &unbound_reports,
        &policy,
        &report(&b, vec![owner(node_b)], ApplyStatus::Applying),
        &["winpool agents may write only their own node's report, and this token names no node".to_string()],
    )
    .await;

    agent_events_only_about_its_own_node(&agent, &agent_ns, &a, &b).await;

    // A Node deleted takes its report with it.
    admin_nodes.delete(&a, &DeleteParams::default()).await.expect("delete node a");
    wait_for("the garbage collector to delete the report of the deleted Node", WAIT, || async {
        admin_reports.get_opt(&a).await.ok()?.is_none().then_some(())
    })
    .await;

    // Without the binding, RBAC alone lets the agent write another node's
    // report: the policy, not RBAC, is what stopped it above.
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(t.client.clone());
    bindings.delete(&policy, &DeleteParams::default()).await.expect("delete the policy binding");
    wait_for("RBAC alone to allow the agent to write another node's report", WAIT, || async {
        reports.create(&PostParams::default(), &report(&b, vec![owner(node_b)], ApplyStatus::Applying)).await.ok()
    })
    .await;

    // No kubelet will confirm the pod's termination; only a deletion without
    // grace removes it, and with it the namespace.
    pods.delete(&pod_name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete the agent pod");
    drop(identity);
    t.cleanup().await;
}

/// On nodes whose machine environment (which a HostProcess container inherits)
/// sets KUBECONFIG to the kubelet's credentials, as the EKS AMI does, and
/// HTTPS_PROXY to a proxy that refuses (the fleet's `host-env`), the agent's
/// reports still land, each written as the agent's own ServiceAccount (the
/// API server's audit log): it neither acts as the kubelet nor goes through
/// the proxy.
#[tokio::test]
async fn an_agent_reports_as_itself_whatever_the_machine_environment_says() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("host-env").await;
    let prefix = t.node_prefix();
    let leaky: Vec<String> = [0, 1].iter().map(|i| format!("{prefix}{i}")).collect();
    t.start_sim(3, &["--host-profile=eks", &format!("--host-faults=host-env@{}", leaky.join("+"))]);
    support::wait_nodes_ready(&t, 3).await;
    // The fleet runs an agent where the operator's DaemonSet puts one.
    let pool = format!("{}-pool", t.id);
    support::apply_pool(&t, &support::pool_manifest(&t, &pool, "10.0.20348.2762", json!({"paused": true}))).await;
    t.start_operator(&[]);
    wait_for("every node's report", WAIT, || async {
        let reports = t.reports().await;
        leaky.iter().all(|n| reports.get(n).is_some_and(|r| r.agent_version.is_some())).then_some(())
    })
    .await;
    let agent = format!("system:serviceaccount:{}:winpool-agent", t.agent_namespace());
    for node in &leaky {
        let writes: Vec<_> = support::audit::requests(&support::audit::audit_log(), node)
            .into_iter()
            .filter(|r| r.resource == "windowsnodereports" && support::audit::is_write(r))
            .collect();
        assert!(writes.iter().any(|r| r.code < 300), "{node}: its report was written ({writes:?})");
        for w in &writes {
            assert_eq!(w.user, agent, "{node}: its report written as the agent's ServiceAccount");
        }
    }
    t.cleanup().await;
}
