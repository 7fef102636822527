use super::*;
use std::collections::BTreeMap;

// ---- builders ----

#[derive(Default, Clone)]
struct Svc {
    type_: &'static str,
    cluster_ip: &'static str,
    families: &'static [&'static str],
    ports: usize,
    node_port: Option<i32>,
    external: &'static [&'static str],
    ingress: &'static [&'static str],
    itp_local: bool,
    no_node_ports: bool,
}

fn service(ns: &str, name: &str, s: &Svc) -> Service {
    Service {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
        spec: Some(ServiceSpec {
            type_: (!s.type_.is_empty()).then(|| s.type_.into()),
            cluster_ip: (!s.cluster_ip.is_empty()).then(|| s.cluster_ip.into()),
            ip_families: (!s.families.is_empty()).then(|| s.families.iter().map(|f| f.to_string()).collect()),
            external_ips: (!s.external.is_empty()).then(|| s.external.iter().map(|f| f.to_string()).collect()),
            internal_traffic_policy: s.itp_local.then(|| "Local".into()),
            allocate_load_balancer_node_ports: s.no_node_ports.then_some(false),
            ports: Some((0..s.ports).map(|i| ServicePort { port: 80 + i as i32, node_port: s.node_port, ..Default::default() }).collect()),
            ..Default::default()
        }),
        status: Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(s.ingress.iter().map(|ip| LoadBalancerIngress { ip: Some(ip.to_string()), ..Default::default() }).collect()),
            }),
            conditions: None,
        }),
    }
}

fn cip() -> Svc {
    Svc { cluster_ip: "10.96.0.10", ports: 1, ..Default::default() }
}

/// A slice of Service `svc` with endpoints (address, ready).
fn slice(ns: &str, name: &str, svc: Option<&str>, address_type: &str, eps: &[(&str, Option<bool>)]) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: svc.map(|s| [(LABEL_SERVICE_NAME.to_string(), s.to_string())].into_iter().collect()),
            ..Default::default()
        },
        address_type: address_type.into(),
        endpoints: Some(
            eps.iter()
                .map(|(a, r)| Endpoint {
                    addresses: vec![a.to_string()],
                    conditions: Some(EndpointConditions { ready: *r, ..Default::default() }),
                    ..Default::default()
                })
                .collect(),
        ),
        ports: None,
    }
}

fn all_ready(eps: &[&str]) -> Vec<(String, Option<bool>)> {
    eps.iter().map(|a| (a.to_string(), Some(true))).collect()
}

fn slice_ready(ns: &str, name: &str, svc: &str, eps: &[(String, Option<bool>)]) -> EndpointSlice {
    let eps: Vec<(&str, Option<bool>)> = eps.iter().map(|(a, r)| (a.as_str(), *r)).collect();
    let family = if eps.first().is_some_and(|(a, _)| a.contains(':')) { "IPv6" } else { "IPv4" };
    slice(ns, name, Some(svc), family, &eps)
}

fn ips(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{}.{}", i / 250, i % 250 + 1)).collect()
}

fn ready(addrs: &[String]) -> Vec<(String, Option<bool>)> {
    addrs.iter().map(|a| (a.clone(), Some(true))).collect()
}

// ---- the model for one Service ----

#[test]
fn service_model_counts_what_kube_proxy_programs() {
    let ds = &["IPv4", "IPv6"][..];
    let cases: &[(&str, Svc, [i64; 2])] = &[
        ("ClusterIP, 1 port", cip(), [1, 0]),
        ("ClusterIP, 3 ports", Svc { ports: 3, ..cip() }, [3, 0]),
        ("ClusterIP, no ports", Svc { ports: 0, ..cip() }, [0, 0]),
        ("headless", Svc { cluster_ip: "None", ports: 2, ..cip() }, [0, 0]),
        ("headless with externalIPs", Svc { cluster_ip: "None", external: &["1.2.3.4"], ..cip() }, [0, 0]),
        ("ClusterIP not allocated yet", Svc { cluster_ip: "", ..cip() }, [0, 0]),
        ("ExternalName", Svc { type_: "ExternalName", ports: 2, ..cip() }, [0, 0]),
        ("NodePort, 2 ports", Svc { type_: "NodePort", ports: 2, node_port: Some(30080), ..cip() }, [4, 0]),
        ("NodePort without nodePort yet", Svc { type_: "NodePort", ..cip() }, [2, 0]),
        (
            "LoadBalancer, 2 ingress IPs",
            Svc { type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
            [4, 0],
        ),
        (
            "LoadBalancer, 2 ports, 2 ingress IPs",
            Svc { type_: "LoadBalancer", ports: 2, node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
            [8, 0],
        ),
        ("LoadBalancer, no status yet", Svc { type_: "LoadBalancer", node_port: Some(30080), ..cip() }, [2, 0]),
        ("LoadBalancer, duplicate ingress IP", Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.1"], ..cip() }, [3, 0]),
        (
            "LoadBalancer, allocateLoadBalancerNodePorts false",
            Svc { type_: "LoadBalancer", no_node_ports: true, ingress: &["20.0.0.1"], ..cip() },
            [2, 0],
        ),
        ("ingress on a ClusterIP Service is ignored", Svc { ingress: &["20.0.0.1"], ..cip() }, [1, 0]),
        ("externalIPs", Svc { external: &["1.2.3.4", "1.2.3.5", "garbage"], ports: 2, ..cip() }, [6, 0]),
        ("internalTrafficPolicy Local", Svc { itp_local: true, ..cip() }, [0, 0]),
        ("internalTrafficPolicy Local, NodePort", Svc { itp_local: true, type_: "NodePort", ..cip() }, [1, 0]),
        ("dual-stack ClusterIP, 2 ports", Svc { families: ds, ports: 2, ..cip() }, [2, 2]),
        (
            "dual-stack LoadBalancer, v4 and v6 ingress",
            Svc { families: ds, type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "2001:db8::1"], ..cip() },
            [3, 3],
        ),
        (
            "dual-stack LoadBalancer, 2 v4 ingress",
            Svc { families: ds, type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
            [4, 2],
        ),
        ("IPv6 single-stack from the ClusterIP", Svc { cluster_ip: "fd00::10", ..cip() }, [0, 1]),
        ("IPv6 external IP on an IPv4 Service is not programmed", Svc { external: &["2001:db8::1"], ..cip() }, [1, 0]),
        ("unknown type counts as ClusterIP", Svc { type_: "Bogus", ..cip() }, [1, 0]),
    ];
    for (name, s, want) in cases {
        let got = service_contribution(&service("ns", "s", s));
        assert_eq!(got.load_balancers, *want, "{name}");
        assert_eq!(got.programmed(), want.iter().sum::<i64>() > 0, "{name}");
    }
    assert_eq!(service_contribution(&Service::default()), ServiceContribution::default());
}

#[test]
fn slice_model_counts_first_ready_address_once() {
    let mut s = slice(
        "ns",
        "s-1",
        Some("web"),
        "IPv4",
        &[("10.0.0.2", Some(true)), ("10.0.0.1", None), ("10.0.0.3", Some(false)), ("10.0.0.2", Some(true)), ("not-an-ip", Some(true))],
    );
    s.endpoints.as_mut().unwrap()[0].addresses.push("10.0.0.9".into());
    let c = slice_contribution(&s);
    assert_eq!(c.service.as_deref(), Some("ns/web"));
    assert_eq!(c.ready, vec!["10.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.2".parse().unwrap()]);

    let fqdn = slice("ns", "f", Some("web"), "FQDN", &[("example.com", Some(true))]);
    assert!(slice_contribution(&fqdn).ready.is_empty());
    let orphan = slice("ns", "o", None, "IPv4", &[("10.0.0.1", Some(true))]);
    assert_eq!(slice_contribution(&orphan).service, None);
}

#[test]
fn stripping_keeps_what_the_model_reads() {
    let ds = &["IPv4", "IPv6"][..];
    let mut svc = service(
        "ns",
        "s",
        &Svc {
            families: ds,
            type_: "LoadBalancer",
            node_port: Some(30080),
            ingress: &["20.0.0.1", "2001:db8::1"],
            external: &["1.2.3.4"],
            ..cip()
        },
    );
    svc.metadata.annotations = Some([("big".to_string(), "x".repeat(10_000))].into_iter().collect());
    svc.spec.as_mut().unwrap().selector = Some([("app".to_string(), "web".to_string())].into_iter().collect());
    let want = service_contribution(&svc);
    strip_service(&mut svc);
    assert_eq!(service_contribution(&svc), want);
    assert!(svc.metadata.annotations.is_none() && svc.spec.as_ref().unwrap().selector.is_none());
    assert_eq!(svc.metadata.name.as_deref(), Some("s"));

    let mut sl = slice("ns", "s-1", Some("web"), "IPv4", &[("10.0.0.1", Some(true)), ("10.0.0.2", Some(false))]);
    sl.metadata.labels.as_mut().unwrap().insert("other".into(), "x".into());
    sl.endpoints.as_mut().unwrap()[0].node_name = Some("node-1".into());
    let want = slice_contribution(&sl);
    strip_slice(&mut sl);
    assert_eq!(slice_contribution(&sl), want);
    assert_eq!(sl.metadata.labels.as_ref().unwrap().len(), 1);
    assert!(sl.endpoints.as_ref().unwrap()[0].node_name.is_none());
}

// ---- the tracker ----

#[test]
fn a_service_counts_once_it_has_ready_endpoints() {
    let ds = &["IPv4", "IPv6"][..];
    // (service, slices as (name, addresses)), expected totals.
    type Case<'a> = (&'a str, Svc, &'a [(&'a str, &'a [&'a str])], (i64, i64));
    let cases: &[Case] = &[
        ("ClusterIP without endpoints", cip(), &[], (0, 0)),
        ("ClusterIP with 3 endpoints", cip(), &[("a", &["10.1.0.1", "10.1.0.2", "10.1.0.3"])], (1, 3)),
        ("headless: nothing, not even endpoints", Svc { cluster_ip: "None", ..cip() }, &[("a", &["10.1.0.1"])], (0, 0)),
        ("ExternalName", Svc { type_: "ExternalName", ..cip() }, &[("a", &["10.1.0.1"])], (0, 0)),
        ("NodePort", Svc { type_: "NodePort", ..cip() }, &[("a", &["10.1.0.1"])], (2, 1)),
        (
            "LoadBalancer with 2 ingress IPs",
            Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
            &[("a", &["10.1.0.1", "10.1.0.2"])],
            (4, 2),
        ),
        ("dual-stack, only IPv4 endpoints", Svc { families: ds, ..cip() }, &[("a", &["10.1.0.1"])], (1, 1)),
        (
            "dual-stack, both families",
            Svc { families: ds, ports: 2, ..cip() },
            &[("a", &["10.1.0.1", "10.1.0.2"]), ("b", &["fd00::1", "fd00::2"])],
            (4, 4),
        ),
        ("IPv6 endpoints of an IPv4 Service", cip(), &[("a", &["fd00::1"])], (0, 0)),
    ];
    for (name, s, slices, want) in cases {
        let mut t = HnsTracker::new();
        t.apply_service(&service("ns", "web", s));
        for (sname, addrs) in *slices {
            let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
            t.apply_slice(&slice_ready("ns", sname, "web", &ready(&addrs)));
        }
        assert_eq!(t.totals(), *want, "{name}");
    }
}

#[test]
fn slice_updates_change_totals_by_the_difference() {
    let mut t = HnsTracker::new();
    t.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
    let a = ips("10.1.", 10);
    t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&a[..5])));
    assert_eq!(t.totals(), (2, 5));
    assert_eq!(t.backends("ns/web"), 5);

    // Grow, shrink, replace: each step is the difference.
    let steps: &[(&[String], (i64, i64))] = &[(&a[..8], (2, 8)), (&a[2..8], (2, 6)), (&a[5..10], (2, 5)), (&[], (0, 0)), (&a[..1], (2, 1))];
    for (addrs, want) in steps {
        t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(addrs)));
        assert_eq!(t.totals(), *want, "{addrs:?}");
        assert_eq!(t.backends("ns/web"), want.1);
    }

    // An endpoint going from ready to not ready (terminating) leaves the count.
    let mut eps = ready(&a[..3]);
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    assert_eq!(t.totals(), (2, 3));
    eps[1].1 = Some(false);
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    assert_eq!(t.totals(), (2, 2));
    eps[1].1 = None; // nil means ready
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    assert_eq!(t.totals(), (2, 3));
    for e in &mut eps {
        e.1 = Some(false);
    }
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    assert_eq!(t.totals(), (0, 0), "no ready endpoint: no load balancer either");
    assert_eq!(t.awaiting_load_balancers(), 2, "but two that wait for one");
}

/// Twelve 3-port Services created before their pods: none on a node yet,
/// 36 load balancers on their way; each one's endpoints move its share over.
#[test]
fn services_without_endpoints_are_demand_on_its_way() {
    let mut t = HnsTracker::new();
    for i in 0..12 {
        let mut svc = service("ns", &format!("s{i}"), &cip());
        svc.spec.as_mut().unwrap().ports = Some((0..3).map(|p| ServicePort { port: 80 + p, ..Default::default() }).collect());
        t.apply_service(&svc);
    }
    assert_eq!((t.totals().0, t.awaiting_load_balancers()), (0, 36));
    t.apply_slice(&slice_ready("ns", "s0-1", "s0", &ready(&ips("10.1.", 2))));
    assert_eq!((t.totals().0, t.awaiting_load_balancers()), (3, 33));
    t.delete_service("ns", "s1");
    assert_eq!((t.totals().0, t.awaiting_load_balancers()), (3, 30));
}

#[test]
fn shared_addresses_count_once() {
    let mut t = HnsTracker::new();
    let a = ips("10.1.", 6);
    t.apply_service(&service("ns", "web", &cip()));
    t.apply_service(&service("ns", "web-alias", &cip()));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&a[..4])));
    t.apply_slice(&slice_ready("ns", "web-2", "web", &ready(&a[2..6])));
    t.apply_slice(&slice_ready("ns", "alias-1", "web-alias", &ready(&a[..6])));
    assert_eq!(t.totals(), (2, 6));
    assert_eq!(t.backends("ns/web"), 8, "duplicates across a Service's slices are summed");
    t.delete_slice("ns", "alias-1");
    assert_eq!(t.totals(), (1, 6));
    t.delete_slice("ns", "web-1");
    assert_eq!(t.totals(), (1, 4));
    t.delete_slice("ns", "web-2");
    assert_eq!(t.totals(), (0, 0));
}

#[test]
fn deleting_services_and_slices_returns_to_zero_in_any_order() {
    let ds = &["IPv4", "IPv6"][..];
    let build = |t: &mut HnsTracker, slices_first: bool| {
        let services = [
            ("a", Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.2"], ..cip() }),
            ("b", Svc { families: ds, ports: 2, ..cip() }),
            ("c", Svc { cluster_ip: "None", ..cip() }),
        ];
        let slices = [
            slice_ready("ns", "a-1", "a", &ready(&ips("10.1.", 70))),
            slice_ready("ns", "b-1", "b", &ready(&ips("10.1.", 3))),
            slice_ready("ns", "b-2", "b", &all_ready(&["fd00::1", "fd00::2"])),
            slice_ready("ns", "c-1", "c", &ready(&ips("10.2.", 5))),
        ];
        if slices_first {
            slices.iter().for_each(|s| t.apply_slice(s));
        }
        for (n, s) in &services {
            t.apply_service(&service("ns", n, s));
        }
        if !slices_first {
            slices.iter().for_each(|s| t.apply_slice(s));
        }
    };
    for slices_first in [false, true] {
        for services_first in [false, true] {
            let mut t = HnsTracker::new();
            build(&mut t, slices_first);
            // a: 4; b: 2 ports × 2 families = 4; c: headless.
            assert_eq!(t.totals(), (8, 72), "slices first: {slices_first}");
            let del_services = |t: &mut HnsTracker| ["a", "b", "c"].iter().for_each(|n| t.delete_service("ns", n));
            let del_slices = |t: &mut HnsTracker| ["a-1", "b-1", "b-2", "c-1"].iter().for_each(|n| t.delete_slice("ns", n));
            if services_first {
                del_services(&mut t);
                assert_eq!(t.totals(), (0, 0), "a deleted Service's endpoints stop counting at once");
                del_slices(&mut t);
            } else {
                del_slices(&mut t);
                assert_eq!(t.totals(), (0, 0));
                del_services(&mut t);
            }
            assert_eq!(t.totals(), (0, 0));
            assert_eq!(t.stats().services + t.stats().slices + t.stats().addresses, 0, "nothing left behind");
            assert!(t.by_backends.is_empty());
        }
    }
}

#[test]
fn out_of_order_and_repeated_events_are_harmless() {
    let mut t = HnsTracker::new();
    t.delete_service("ns", "ghost");
    t.delete_slice("ns", "ghost-1");
    assert_eq!(t.stats(), HnsTracker::new().stats());

    // Slice before its Service: nothing until the Service arrives.
    let eps = ready(&ips("10.1.", 4));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
    assert_eq!(t.totals(), (0, 0));
    t.apply_service(&service("ns", "web", &cip()));
    t.apply_service(&service("ns", "web", &cip()));
    assert_eq!(t.totals(), (1, 4));

    // The Service turns headless-like (ExternalName): its endpoints stop counting; and back.
    t.apply_service(&service("ns", "web", &Svc { type_: "ExternalName", ..cip() }));
    assert_eq!(t.totals(), (0, 0));
    t.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
    assert_eq!(t.totals(), (2, 4));

    // A slice relabelled to another Service moves its counts.
    t.apply_service(&service("ns", "other", &Svc { ports: 3, ..cip() }));
    t.apply_slice(&slice_ready("ns", "web-1", "other", &eps));
    assert_eq!(t.totals(), (3, 4));
    assert_eq!((t.backends("ns/web"), t.backends("ns/other")), (0, 4));
    // ... and to none (label removed).
    t.apply_slice(&slice("ns", "web-1", None, "IPv4", &[("10.1.0.1", Some(true))]));
    assert_eq!(t.totals(), (0, 0));
    t.delete_slice("ns", "web-1");
    t.delete_service("ns", "web");
    t.delete_service("ns", "web");
    t.delete_service("ns", "other");
    assert_eq!(t.stats().services + t.stats().slices, 0);
}

#[test]
fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
    let mut t = HnsTracker::new();
    let s1 = service("ns", "a", &cip());
    let s2 = service("ns", "b", &cip());
    let sl1 = slice_ready("ns", "a-1", "a", &ready(&ips("10.1.", 2)));
    let sl2 = slice_ready("ns", "b-1", "b", &ready(&ips("10.2.", 3)));
    for e in [watcher::Event::Apply(s1.clone()), watcher::Event::Apply(s2.clone())] {
        t.service_event(&e);
    }
    t.slice_event(&watcher::Event::Apply(sl1.clone()));
    t.slice_event(&watcher::Event::Apply(sl2.clone()));
    assert_eq!(t.totals(), (2, 5));

    // Relist: b and its slice are gone.
    t.service_event(&watcher::Event::Init);
    t.service_event(&watcher::Event::InitApply(s1.clone()));
    assert_eq!(t.totals(), (2, 5), "last known counts until InitDone");
    assert!(!t.synced(), "no watch has finished a list yet");
    t.service_event(&watcher::Event::InitDone);
    assert!(!t.synced(), "the EndpointSlice list is still running");
    assert_eq!(t.totals(), (1, 2));
    t.slice_event(&watcher::Event::Init);
    t.slice_event(&watcher::Event::InitApply(sl1.clone()));
    t.slice_event(&watcher::Event::InitDone);
    assert!(t.synced(), "both lists done");
    assert_eq!(t.totals(), (1, 2));
    assert_eq!(t.stats().slices, 1);

    t.slice_event(&watcher::Event::Delete(sl1));
    t.service_event(&watcher::Event::Delete(s1));
    assert_eq!(t.totals(), (0, 0));
}

#[test]
fn services_over_the_backend_limit_are_listed_bounded_with_the_exact_total() {
    let mut t = HnsTracker::new();
    // 30 Services with 65 backends, 10 with exactly 64, one headless with 100.
    for i in 0..40 {
        let name = format!("svc-{i:02}");
        t.apply_service(&service("ns", &name, &cip()));
        let n = if i < 30 { 65 } else { 64 };
        t.apply_slice(&slice_ready("ns", &format!("{name}-1"), &name, &ready(&ips(&format!("10.{i}."), n))));
    }
    t.apply_service(&service("ns", "headless", &Svc { cluster_ip: "None", ..cip() }));
    t.apply_slice(&slice_ready("ns", "headless-1", "headless", &ready(&ips("10.99.", 100))));

    let (listed, total) = t.services_over(64);
    assert_eq!(total, 30);
    assert_eq!(listed.len(), MAX_LISTED_SERVICES);
    let want: Vec<String> = (0..20).map(|i| format!("ns/svc-{i:02}")).collect();
    assert_eq!(listed, want, "first 20 by name");
    assert_eq!(t.services_over(63).1, 40);
    assert_eq!(t.services_over(65), (vec![], 0));
    assert_eq!(t.services_over(0), (vec![], 0), "0 = no limit");

    // Shrinking one below the limit takes it off the list.
    t.apply_slice(&slice_ready("ns", "svc-00-1", "svc-00", &ready(&ips("10.0.", 10))));
    let (listed, total) = t.services_over(64);
    assert_eq!((listed[0].as_str(), total), ("ns/svc-01", 29));
    // Backends across slices add up.
    t.apply_slice(&slice_ready("ns", "svc-00-2", "svc-00", &ready(&ips("10.200.", 60))));
    assert_eq!(t.services_over(64).1, 30);
}

#[test]
fn stats_are_reported() {
    let mut t = HnsTracker::new();
    t.apply_service(&service("ns", "web", &cip()));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&ips("10.1.", 100))));
    let s = t.stats();
    assert_eq!((s.services, s.slices, s.addresses), (1, 1, 100));
    assert!(s.approx_bytes > 100 * size_of::<IpAddr>(), "{s:?}");
}

// ---- incremental == recount, over random event sequences ----

#[derive(Debug, Clone)]
enum Op {
    Service(usize, Option<[i64; 2]>),
    Slice(usize, Option<(Option<usize>, Vec<u8>)>),
}

fn addr(i: u8) -> IpAddr {
    if i % 4 == 3 { IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, u16::from(i)]) } else { IpAddr::from([10, 0, 0, i]) }
}

fn recount(
    services: &BTreeMap<usize, ServiceContribution>,
    slices: &BTreeMap<usize, SliceContribution>,
    limit: i64,
) -> ((i64, i64), Vec<String>, usize) {
    let mut backends: BTreeMap<String, [i64; 2]> = BTreeMap::new();
    for c in slices.values() {
        if let Some(s) = &c.service {
            let mut r = c.ready.clone();
            r.sort();
            r.dedup();
            for ip in r {
                backends.entry(s.clone()).or_default()[family(&ip)] += 1;
            }
        }
    }
    let mut lbs = 0;
    let mut over = Vec::new();
    let svc = |k: &str| services.iter().find(|(i, _)| format!("ns/s{i}") == k).map(|(_, c)| *c);
    for (i, c) in services {
        let key = format!("ns/s{i}");
        let b = backends.get(&key).copied().unwrap_or_default();
        let mut most = 0;
        for (lb, n) in c.load_balancers.into_iter().zip(b) {
            if lb > 0 && n > 0 {
                lbs += lb;
                most = most.max(n);
            }
        }
        if most > limit {
            over.push(key);
        }
    }
    let mut addrs: BTreeSet<IpAddr> = BTreeSet::new();
    for c in slices.values() {
        let Some(s) = c.service.as_deref().and_then(svc) else { continue };
        addrs.extend(c.ready.iter().filter(|ip| s.load_balancers[family(ip)] > 0));
    }
    over.sort();
    let total = over.len();
    over.truncate(MAX_LISTED_SERVICES);
    ((lbs, addrs.len() as i64), over, total)
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4usize, prop::option::weighted(0.8, [0..3i64, 0..3i64])).prop_map(|(i, c)| Op::Service(i, c)),
            (0..6usize, prop::option::weighted(0.8, (prop::option::weighted(0.9, 0..5usize), prop::collection::vec(0..16u8, 0..8))))
                .prop_map(|(i, c)| Op::Slice(i, c)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn incremental_totals_match_a_recount(ops in prop::collection::vec(op(), 1..60)) {
            let mut t = HnsTracker::new();
            let mut services = BTreeMap::new();
            let mut slices = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Service(i, c) => {
                        let c = c.map(|lb| ServiceContribution { load_balancers: lb });
                        t.set_service(&format!("ns/s{i}"), c);
                        match c { Some(c) => { services.insert(i, c); } None => { services.remove(&i); } }
                    }
                    Op::Slice(i, c) => {
                        let c = c.map(|(s, a)| SliceContribution {
                            service: s.map(|s| format!("ns/s{s}")),
                            ready: a.into_iter().map(addr).collect(),
                        });
                        t.set_slice(&format!("ns/sl{i}"), c.clone());
                        match c { Some(c) => { slices.insert(i, c); } None => { slices.remove(&i); } }
                    }
                }
                let (totals, over, total) = recount(&services, &slices, 2);
                prop_assert_eq!(t.totals(), totals);
                prop_assert_eq!(t.services_over(2), (over, total));
            }
            // Deleting everything leaves nothing behind.
            for i in 0..6 { t.set_slice(&format!("ns/sl{i}"), None); }
            for i in 0..4 { t.set_service(&format!("ns/s{i}"), None); }
            prop_assert_eq!(t.totals(), (0, 0));
            prop_assert_eq!(t.stats().services + t.stats().slices, 0);
            prop_assert!(t.by_backends.is_empty());
        }
    }
}

// ---- limits and capacity ----

#[test]
fn limits_default_per_release_and_take_overrides() {
    let l19 = Limits::default_for(OsVersion::Ltsc2019);
    assert_eq!(l19, Limits { load_balancers: 1_000, endpoints: 5_000, backends_per_service: 64 });
    for os in [OsVersion::Ltsc2022, OsVersion::Ltsc2025] {
        assert_eq!(Limits::default_for(os), Limits { load_balancers: 5_000, endpoints: 20_000, backends_per_service: 1_024 });
    }
    let spec = HnsSpec { max_load_balancers: 300, max_endpoints: 0, max_backends_per_service: -5, ..Default::default() };
    assert_eq!(Limits::for_pool(&spec, OsVersion::Ltsc2019), Limits { load_balancers: 300, endpoints: 5_000, backends_per_service: 64 });
    assert_eq!(Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2022), Limits::default_for(OsVersion::Ltsc2022));
    assert_eq!(l19.utilization((812, 4_100)), 0.82);
    assert_eq!(l19.utilization((900, 100)), 0.9);
    assert_eq!(l19.utilization((0, 0)), 0.0);
}

#[test]
fn capacity_thresholds() {
    let l = Limits { load_balancers: 1_000, endpoints: 20_000, backends_per_service: 64 };
    // (totals, warn, over-limit count, state, condition status)
    type Case<'a> = ((i64, i64), i32, usize, &'a str, &'a str);
    let cases: &[Case] = &[
        ((0, 0), 80, 0, "WithinLimits", "True"),
        ((799, 15_999), 80, 0, "WithinLimits", "True"),
        ((800, 0), 80, 0, "NearLimit", "True"),
        ((0, 16_000), 80, 0, "NearLimit", "True"),
        ((1_000, 20_000), 80, 0, "NearLimit", "True"),
        ((1_001, 0), 80, 0, "Exceeded", "False"),
        ((0, 20_001), 80, 0, "Exceeded", "False"),
        ((10, 10), 80, 1, "Exceeded", "False"),
        ((999, 0), 100, 0, "WithinLimits", "True"),
        ((1_000, 0), 100, 0, "NearLimit", "True"),
        ((10, 0), 1, 0, "NearLimit", "True"),
        ((9, 0), 0, 0, "WithinLimits", "True"),     // warn clamped to 1%: 9 is 0.9%
        ((799, 0), 250, 0, "WithinLimits", "True"), // warn clamped to 100%
    ];
    for (totals, warn, over, state, status) in cases {
        let names: Vec<String> = (0..*over).map(|i| format!("ns/s{i}")).collect();
        let (st, c) = capacity(*totals, &l, *warn, (names, *over));
        assert_eq!(
            (st.state.as_str(), c.reason.as_str(), c.status.as_str()),
            (*state, *state, *status),
            "{totals:?} warn {warn}: {}",
            c.message
        );
        assert_eq!(c.type_, conditions::HNS_CAPACITY);
        assert_eq!(
            (st.expected_load_balancers, st.limit_load_balancers, st.expected_endpoints, st.limit_endpoints),
            (totals.0, 1_000, totals.1, 20_000)
        );
    }
}

#[test]
fn capacity_messages_give_the_numbers_and_name_services() {
    let l = Limits { load_balancers: 1_000, endpoints: 20_000, backends_per_service: 64 };
    let (_, c) = capacity((812, 4_100), &l, 80, (vec![], 0));
    assert_eq!(
        c.message,
        "812 of 1,000 load balancers (81%), 4,100 of 20,000 endpoints (20%); warn at 80%; near the limit: load balancers"
    );
    let (_, c) = capacity((100, 4_100), &l, 80, (vec![], 0));
    assert_eq!(c.message, "100 of 1,000 load balancers (10%), 4,100 of 20,000 endpoints (20%); warn at 80%");
    let (_, c) = capacity((1_200, 30_000), &l, 80, (vec![], 0));
    assert!(
        c.message.contains("1,200 of 1,000 load balancers (120%)") && c.message.contains("over the limit: load balancers and endpoints"),
        "{}",
        c.message
    );
    let (_, c) = capacity((1_200, 17_000), &l, 80, (vec![], 0));
    assert!(c.message.ends_with("; over the limit: load balancers; near the limit: endpoints"), "{}", c.message);

    let names: Vec<String> = (0..25).map(|i| format!("ns/s{i:02}")).collect();
    let (st, c) = capacity((10, 10), &l, 80, (names, 31));
    assert_eq!(st.services_over_backend_limit.len(), MAX_LISTED_SERVICES, "status list bounded");
    assert_eq!(st.state, CapacityState::Exceeded);
    assert!(
        c.message.ends_with(
            "; 31 Services have more ready backends than the 64 one HNS load balancer accepts (\"invalid number of destinations\"): ns/s00, ns/s01, ns/s02, ns/s03, ns/s04, and 26 more"
        ),
        "{}",
        c.message
    );
    let (_, c) = capacity((10, 10), &l, 80, (vec!["ns/a".into()], 1));
    assert!(
        c.message.ends_with(
            "1 Service has more ready backends than the 64 one HNS load balancer accepts (\"invalid number of destinations\"): ns/a"
        ),
        "{}",
        c.message
    );
    assert_eq!(thousands(-1_234_567), "-1,234,567");
    assert_eq!(thousands(100), "100");
}

#[test]
fn capacity_from_the_tracker() {
    let mut t = HnsTracker::new();
    for i in 0..3 {
        let name = format!("s{i}");
        t.apply_service(&service("ns", &name, &cip()));
        t.apply_slice(&slice_ready("ns", &format!("{name}-1"), &name, &ready(&ips(&format!("10.{i}."), 70))));
    }
    let limits = Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2019);
    let (st, c) = capacity(t.totals(), &limits, 80, t.services_over(limits.backends_per_service));
    assert_eq!((st.expected_load_balancers, st.expected_endpoints), (3, 210));
    assert_eq!(st.services_over_backend_limit, ["ns/s0", "ns/s1", "ns/s2"]);
    assert_eq!(c.reason, "Exceeded");
    let limits = Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2022);
    let (st, _) = capacity(t.totals(), &limits, 80, t.services_over(limits.backends_per_service));
    assert_eq!(st.state, CapacityState::WithinLimits);
    assert!(st.services_over_backend_limit.is_empty());
}

// ---- node readiness, condition, taint ----

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn node_readiness_from_reported_counts() {
    use HnsReadiness::*;
    let now = ts("2026-11-29T12:00:00Z");
    let wait = AwaitingReport { since: ts("2026-11-29T11:55:00Z"), grace: SignedDuration::from_mins(10) };
    let expired = AwaitingReport { since: ts("2026-11-29T11:00:00Z"), grace: SignedDuration::from_mins(10) };
    // (lb, ep, expected, tolerance, awaiting, readiness, reason)
    type Case<'a> = (Option<i64>, Option<i64>, (i64, i64), u8, Option<AwaitingReport>, HnsReadiness, &'a str);
    let cases: &[Case] = &[
        (Some(812), Some(4100), (812, 4_100), 5, None, Ready, "CaughtUp"),
        (Some(772), Some(3895), (812, 4_100), 5, None, Ready, "CaughtUp"), // exactly 95%, rounded up
        (Some(771), Some(3895), (812, 4_100), 5, None, NotReady, "CatchingUp"),
        (Some(772), Some(3894), (812, 4_100), 5, None, NotReady, "CatchingUp"),
        (Some(900), Some(5000), (812, 4_100), 0, None, Ready, "CaughtUp"),
        (Some(811), Some(4100), (812, 4_100), 0, None, NotReady, "CatchingUp"),
        (Some(0), Some(0), (812, 4_100), 100, None, Ready, "CaughtUp"),
        (Some(0), Some(0), (812, 4_100), 255, None, Ready, "CaughtUp"),
        (Some(0), Some(0), (0, 0), 5, None, Ready, "CaughtUp"),
        (Some(0), Some(0), (812, 4_100), 5, Some(wait), NotReady, "CatchingUp"),
        (None, None, (812, 4_100), 5, None, Unknown, "NotReported"),
        (Some(812), None, (812, 4_100), 5, None, Unknown, "NotReported"),
        (None, None, (812, 4_100), 5, Some(wait), NotReady, "AwaitingReport"),
        (None, Some(4100), (812, 4_100), 5, Some(wait), NotReady, "AwaitingReport"),
        (None, None, (812, 4_100), 5, Some(expired), Unknown, "NotReported"),
        (Some(i64::MAX), Some(i64::MAX), (i64::MAX, i64::MAX), 0, None, Ready, "CaughtUp"),
    ];
    for (lb, ep, expected, tol, awaiting, want, reason) in cases {
        let (r, why, msg) = node_readiness(*lb, *ep, *expected, *tol, *awaiting, now);
        assert_eq!((r, why), (*want, *reason), "{lb:?} {ep:?} {expected:?} tol {tol}: {msg}");
        assert!(msg.len() < 400, "bounded message: {msg}");
    }

    let (_, _, msg) = node_readiness(Some(120), Some(300), (812, 4_100), 5, None, now);
    assert_eq!(msg, "HNS is catching up: 120 of 812 load balancers and 300 of 4,100 endpoints programmed; ready at 772 and 3,895 (95%)");
    let (_, _, msg) = node_readiness(None, None, (812, 4_100), 5, None, now);
    assert!(msg.contains("hns.loadBalancers and hns.endpoints missing") && msg.contains("not tainted"), "{msg}");
    let (_, _, msg) = node_readiness(None, None, (1, 1), 5, Some(wait), now);
    assert!(msg.contains("2026-11-29T11:55:00Z") && msg.contains("10m"), "{msg}");
    // A Ready message does not move with the cluster's counts (no rewrite of every node on each change).
    let a = node_readiness(Some(900), Some(5000), (812, 4_100), 5, None, now).2;
    let b = node_readiness(Some(900), Some(5000), (813, 4_000), 5, None, now).2;
    assert_eq!(a, b);
}

#[test]
fn node_condition_keeps_transition_time_while_status_holds() {
    let t0 = ts("2026-11-29T12:00:00Z");
    let t1 = ts("2026-11-29T12:01:00Z");
    let t2 = ts("2026-11-29T12:02:00Z");
    let c0 = node_condition(HnsReadiness::NotReady, "CatchingUp", "1 of 2", None, t0);
    assert_eq!((c0.type_.as_str(), c0.status.as_str()), ("WindowsHNSReady", "False"));
    assert_eq!(c0.last_transition_time, Some(Time(t0)));

    // Same everything: identical, so no write is needed.
    assert_eq!(node_condition(HnsReadiness::NotReady, "CatchingUp", "1 of 2", Some(&c0), t1), c0);
    // Same status, new message: transition kept, heartbeat moves.
    let c1 = node_condition(HnsReadiness::NotReady, "CatchingUp", "2 of 3", Some(&c0), t1);
    assert_eq!((c1.last_transition_time.clone(), c1.last_heartbeat_time.clone()), (Some(Time(t0)), Some(Time(t1))));
    // Status flips: both move.
    let c2 = node_condition(HnsReadiness::Ready, "CaughtUp", "ok", Some(&c1), t2);
    assert_eq!((c2.status.as_str(), c2.last_transition_time.clone()), ("True", Some(Time(t2))));
    let c3 = node_condition(HnsReadiness::Unknown, "NotReported", "?", Some(&c2), t2);
    assert_eq!(c3.status, "Unknown");
    // A previous condition of another type is ignored.
    let other = NodeCondition { type_: "Ready".into(), status: "False".into(), last_transition_time: Some(Time(t0)), ..Default::default() };
    assert_eq!(node_condition(HnsReadiness::NotReady, "x", "y", Some(&other), t2).last_transition_time, Some(Time(t2)));
}

#[test]
fn only_not_ready_taints_and_the_taint_list_changes_minimally() {
    use HnsReadiness::*;
    for (r, flag, held, want) in [
        (NotReady, true, false, Some(true)),
        (NotReady, false, false, Some(false)),
        (Ready, true, false, Some(false)),
        (Unknown, true, false, Some(false)),
        // Held cordoned for its update: no new taint, an existing one stays until Ready.
        (NotReady, true, true, None),
        (NotReady, false, true, Some(false)),
        (Ready, true, true, Some(false)),
        (Unknown, true, true, Some(false)),
    ] {
        assert_eq!(taint_wanted(r, flag, held), want, "{r:?} taintWhenNotReady={flag} held={held}");
    }
    let other = Taint { key: "dedicated".into(), value: Some("win".into()), effect: "NoSchedule".into(), time_added: None };
    let ours_noexec = Taint { key: names::TAINT_HNS_NOT_READY.into(), effect: "NoExecute".into(), value: None, time_added: None };
    type Case = (Vec<Taint>, bool, Option<Vec<Taint>>);
    let cases: &[Case] = &[
        (vec![], true, Some(vec![hns_taint()])),
        (vec![], false, None),
        (vec![other.clone()], true, Some(vec![other.clone(), hns_taint()])),
        (vec![other.clone(), hns_taint()], true, None),
        (vec![hns_taint(), other.clone()], false, Some(vec![other.clone()])),
        (vec![hns_taint()], false, Some(vec![])),
        (vec![ours_noexec.clone()], false, None),
        (vec![ours_noexec.clone()], true, Some(vec![ours_noexec.clone(), hns_taint()])),
    ];
    for (current, wanted, want) in cases {
        assert_eq!(&taints_update(current, *wanted), want, "{current:?} wanted {wanted}");
    }
    assert_eq!(hns_taint().key, "winpool.dev/hns-not-ready");
    assert_eq!(hns_taint().effect, "NoSchedule");
}

// ---- the programming backlog ----

fn synced() -> HnsTracker {
    let mut t = HnsTracker::new();
    t.service_event(&watcher::Event::InitDone);
    t.slice_event(&watcher::Event::InitDone);
    t
}

fn works(t: &mut HnsTracker) -> Vec<Work> {
    t.take_work().into_iter().map(|(_, w)| w).collect()
}

/// What a change costs each node is what winkernel redoes: every load
/// balancer of a Service whose endpoints changed (a NodePort Service has
/// two), and each remote endpoint that appeared or went. The same slice
/// written again, or a change before both lists are in, costs nothing.
#[test]
fn a_change_costs_the_load_balancers_it_replaces_and_the_endpoints_it_moves() {
    let mut early = HnsTracker::new();
    early.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
    early.apply_slice(&slice_ready("ns", "web-1", "web", &all_ready(&["10.1.0.1"])));
    assert_eq!(works(&mut early), [], "what a node holds before the lists are in is no change");

    let mut t = synced();
    t.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
    assert_eq!(works(&mut t), [], "no endpoint, no load balancer");
    t.apply_slice(&slice_ready("ns", "web-1", "web", &all_ready(&["10.1.0.1", "10.1.0.2"])));
    let work = t.take_work();
    assert_eq!(work.len(), 1);
    assert_eq!((&*work[0].0, work[0].1), ("ns/web", Work { load_balancers: 2, remote_endpoints: 2 }));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &all_ready(&["10.1.0.1", "10.1.0.2"])));
    assert_eq!(works(&mut t), [], "the same slice again");
    // A pod moved: one address out, one in; both load balancers replaced.
    t.apply_slice(&slice_ready("ns", "web-1", "web", &all_ready(&["10.1.0.1", "10.1.0.3"])));
    assert_eq!(works(&mut t), [Work { load_balancers: 2, remote_endpoints: 2 }]);
    t.delete_service("ns", "web");
    assert_eq!(works(&mut t), [Work { load_balancers: 2, remote_endpoints: 2 }]);
}

/// The backlog worked out by hand at the published rates (ltsc2019: 600 ms a
/// load balancer, 24 ms a remote endpoint; ltsc2022: 27 ms and 1.2 ms), with
/// kube-proxy's syncs: a change heard during a sync waits for the next, and a
/// Service changed twice before its sync is programmed once.
#[test]
fn the_backlog_queues_changes_in_syncs_at_each_releases_pace() {
    use std::time::Duration;
    let t0 = Timestamp::UNIX_EPOCH;
    let at = |ms: i64| t0 + SignedDuration::from_millis(ms);
    let (a, b): (Arc<str>, Arc<str>) = ("ns/a".into(), "ns/b".into());
    let mut q = Backlog::default();
    // a: 2019 syncs it at once, 0 → 6.12 s; 2022, 0 → 0.276 s.
    q.charge(&a, Work { load_balancers: 10, remote_endpoints: 5 }, t0);
    // b at 1 s waits for that sync on 2019 (6 s of its own); 2022 is idle again: 0.27 s.
    q.charge(&b, Work { load_balancers: 10, remote_endpoints: 0 }, at(1000));
    assert_eq!(q.of(OsVersion::Ltsc2019, at(1000)), Duration::from_millis(6120 - 1000 + 6000));
    assert_eq!(q.of(OsVersion::Ltsc2022, at(1000)), Duration::from_millis(270));
    assert_eq!(q.of(OsVersion::Ltsc2025, at(1000)), q.of(OsVersion::Ltsc2022, at(1000)), "2025 as 2022");
    // b again at 2 s, before its sync began: it is programmed once.
    q.charge(&b, Work { load_balancers: 10, remote_endpoints: 0 }, at(2000));
    assert_eq!(q.of(OsVersion::Ltsc2019, at(2000)), Duration::from_millis(6120 + 6000 - 2000));
    assert_eq!(q.of(OsVersion::Ltsc2019, at(12_120)), Duration::ZERO, "drained by then");
    q.charge(&a, Work::default(), at(20_000));
    assert_eq!(q.of(OsVersion::Ltsc2019, at(20_000)), Duration::ZERO, "nothing to program costs nothing");

    // Through the tracker: what the watches applied, charged when heard.
    let mut t = synced();
    t.apply_service(&service("ns", "web", &cip()));
    t.apply_slice(&slice_ready("ns", "web-1", "web", &all_ready(&["10.1.0.1"])));
    t.charge(t0);
    assert_eq!(t.backlog(OsVersion::Ltsc2019, t0), Duration::from_millis(624));
}

/// A pace a pool sets (`rollout.hnsPacing.rates`) has a queue of its own,
/// kept from when a pool first asked for it (what was heard before is not in
/// it) and dropped once no pool asked for an hour; the release's default pace
/// asked that way is the release's queue.
#[test]
fn a_pool_s_own_pace_queues_from_when_it_is_first_asked() {
    use std::time::Duration;
    let t0 = Timestamp::UNIX_EPOCH;
    let at = |ms: i64| t0 + SignedDuration::from_millis(ms);
    let a: Arc<str> = "ns/a".into();
    let w = Work { load_balancers: 10, remote_endpoints: 5 };
    let slow = ProgrammingRates { per_load_balancer: Duration::from_millis(1200), per_remote_endpoint: Duration::from_millis(48) };
    let mut q = Backlog::default();
    q.charge(&a, w, t0);
    assert_eq!(q.at_rates(OsVersion::Ltsc2019, slow, at(0)), Duration::ZERO, "heard before the pace was asked: not in its queue");
    q.charge(&a, w, at(10_000));
    // Twice the release's pace: 12.24 s where the release's queue has 6.12 s.
    assert_eq!(q.at_rates(OsVersion::Ltsc2019, slow, at(10_000)), Duration::from_millis(12_240));
    assert_eq!(q.of(OsVersion::Ltsc2019, at(10_000)), Duration::from_millis(6_120));
    assert_eq!(
        q.at_rates(OsVersion::Ltsc2019, ProgrammingRates::default_for(OsVersion::Ltsc2019), at(10_000)),
        q.of(OsVersion::Ltsc2019, at(10_000)),
        "the release's own pace is the release's queue"
    );
    // Not asked for two hours: dropped at the next change, and started anew when asked again.
    q.charge(&a, w, at(2 * 3600 * 1000 + 10_000));
    assert_eq!(q.at_rates(OsVersion::Ltsc2019, slow, at(2 * 3600 * 1000 + 10_000)), Duration::ZERO);
}

/// A node that rebooted programs, right after its full sync, everything it
/// heard change meanwhile as one sync: worked by hand at WS2019's pace (600
/// ms a load balancer), the same case as the fleet's
/// `TestTheSyncsBehindACatchUpAreToldApart`. Booted at 0 with a 5 s full
/// sync; Services a and b change at 1 s; c at 5.5 s. At 5.5 s the node
/// programs a+b (5 → 6.2) and c after (→ 6.8): 1.3 s left, where a node in
/// steady state, which programmed a and b at 1 s, has c's 0.6 s.
#[test]
fn a_rebooted_node_programs_what_changed_while_it_caught_up_in_one_sync() {
    use std::time::Duration;
    let rates = ProgrammingRates::default_for(OsVersion::Ltsc2019);
    let t0 = ts("2026-12-05T12:00:00Z");
    let at = |ms: i64| t0 + SignedDuration::from_millis(ms);
    let lb = Work { load_balancers: 1, remote_endpoints: 0 };
    let mut b = Backlog::default();
    b.charge(&Arc::from("a"), lb, at(1000));
    b.charge(&Arc::from("b"), lb, at(1000));
    b.charge(&Arc::from("a"), lb, at(1000));
    b.charge(&Arc::from("c"), lb, at(5500));
    let full = Duration::from_secs(5);
    assert_eq!(b.after_boot(&rates, t0, full, at(5500)), Some(Duration::from_millis(1300)));
    assert_eq!(b.of(OsVersion::Ltsc2019, at(5500)), Duration::from_millis(600));
    // Still in its full sync at 3 s: a change then waits for a and b once
    // the node serves (the rest of the full sync is not counted).
    assert_eq!(b.after_boot(&rates, t0, full, at(3000)), Some(Duration::from_millis(1200)));
    // A boot older than the changes kept is steady state.
    assert_eq!(b.after_boot(&rates, t0 - SignedDuration::from_hours(1), full, at(5500)), None);
}
