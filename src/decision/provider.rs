//! Nodes whose cloud provider manages their image: it may reimage or replace
//! them, which undoes the patches winpool applies in place. winpool still
//! rolls them; the pool's status says so once (condition `ProviderManaged`),
//! pointing at the guide for that provider (`docs/clusters.md`).

use std::collections::BTreeMap;

use crate::decision::membership::LabelLookup;

/// A provider that manages its nodes' image, told by a label its nodes carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Provider {
    /// AKS: a node image upgrade (`nodeOSUpgradeChannel: NodeImage`, the
    /// default) reimages the node; so does an autoscaler scale-out's new node.
    Aks,
    /// EKS managed node groups: an AMI update replaces the node.
    Eks,
}

impl Provider {
    const ALL: [Provider; 2] = [Provider::Aks, Provider::Eks];

    /// The label that marks a node as this provider's.
    pub fn label(self) -> &'static str {
        match self {
            Provider::Aks => "kubernetes.azure.com/node-image-version",
            Provider::Eks => "eks.amazonaws.com/nodegroup",
        }
    }

    pub fn of(labels: &(impl LabelLookup + ?Sized)) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| labels.label(p.label()).is_some())
    }

    fn name(self) -> &'static str {
        match self {
            Provider::Aks => "AKS",
            Provider::Eks => "EKS managed node group",
        }
    }

    /// What undoes winpool's patches there, and what to do about it.
    fn advice(self) -> &'static str {
        match self {
            Provider::Aks => {
                "a node image upgrade reimages them and undoes in-place patches: set the node pool's nodeOSUpgradeChannel to None or Unmanaged"
            }
            Provider::Eks => "an AMI update replaces them and undoes in-place patches: pin the node group's AMI",
        }
    }
}

/// How many of a pool's members each provider manages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedNodes(BTreeMap<Provider, usize>);

impl ManagedNodes {
    pub fn count(&mut self, labels: &(impl LabelLookup + ?Sized)) {
        if let Some(p) = Provider::of(labels) {
            *self.0.entry(p).or_default() += 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The condition's reason: the one provider, or both.
    pub fn reason(&self) -> &'static str {
        match self.0.keys().collect::<Vec<_>>()[..] {
            [] => "NoProviderManagedNodes",
            [Provider::Aks] => "AKSNodeImage",
            [Provider::Eks] => "EKSManagedNodeGroup",
            _ => "ProviderManagedNodes",
        }
    }

    /// "4 of 6 nodes are AKS nodes (kubernetes.azure.com/node-image-version): …".
    pub fn message(&self, members: usize) -> String {
        let parts: Vec<String> =
            self.0.iter().map(|(p, n)| format!("{n} of {members} nodes are {} nodes ({}): {}", p.name(), p.label(), p.advice())).collect();
        format!("{}; see docs/clusters.md", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_provider_is_told_by_its_nodes_label() {
        let aks = labels(&[("kubernetes.azure.com/node-image-version", "AKSWindows-2022-containerd-20348.2762.241009")]);
        let eks = labels(&[("eks.amazonaws.com/nodegroup", "windows-ng")]);
        let own = labels(&[("kubernetes.io/os", "windows")]);
        assert_eq!(Provider::of(&aks), Some(Provider::Aks));
        assert_eq!(Provider::of(&eks), Some(Provider::Eks));
        assert_eq!(Provider::of(&own), None);

        let mut m = ManagedNodes::default();
        assert_eq!(m.reason(), "NoProviderManagedNodes");
        for l in [&aks, &aks, &own] {
            m.count(l);
        }
        assert_eq!(m.reason(), "AKSNodeImage");
        assert_eq!(
            m.message(3),
            "2 of 3 nodes are AKS nodes (kubernetes.azure.com/node-image-version): a node image upgrade reimages them and undoes \
             in-place patches: set the node pool's nodeOSUpgradeChannel to None or Unmanaged; see docs/clusters.md"
        );
        m.count(&eks);
        assert_eq!(m.reason(), "ProviderManagedNodes");
        assert!(m.message(4).contains("; 1 of 4 nodes are EKS managed node group nodes (eks.amazonaws.com/nodegroup): an AMI update"));
    }
}
