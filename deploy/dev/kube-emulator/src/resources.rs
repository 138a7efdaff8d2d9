//! The resource types the emulator serves: core v1 Namespaces, Secrets and ConfigMaps,
//! apps/v1 Deployments (the HyperShift operator's own, as `hypershift install` makes
//! it), and HyperShift's HostedCluster and NodePool (hypershift.openshift.io/v1beta1).

/// One served resource type.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a `/status` subresource: status changes only through it.
    pub status: bool,
    /// Has a `/scale` subresource (`spec.replicas` ↔ `status.replicas`).
    pub scale: bool,
    pub short_names: &'static [&'static str],
}

pub const HYPERSHIFT_GROUP: &str = "hypershift.openshift.io";
pub const HYPERSHIFT_VERSION: &str = "v1beta1";

pub static NAMESPACES: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    namespaced: false,
    status: true,
    scale: false,
    short_names: &["ns"],
};

pub static SECRETS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    kind: "Secret",
    namespaced: true,
    status: false,
    scale: false,
    short_names: &[],
};

pub static CONFIG_MAPS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    plural: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    namespaced: true,
    status: false,
    scale: false,
    short_names: &["cm"],
};

pub static DEPLOYMENTS: ResourceType = ResourceType {
    group: "apps",
    version: "v1",
    plural: "deployments",
    singular: "deployment",
    kind: "Deployment",
    namespaced: true,
    status: true,
    scale: false,
    short_names: &["deploy"],
};

pub static HOSTED_CLUSTERS: ResourceType = ResourceType {
    group: HYPERSHIFT_GROUP,
    version: HYPERSHIFT_VERSION,
    plural: "hostedclusters",
    singular: "hostedcluster",
    kind: "HostedCluster",
    namespaced: true,
    status: true,
    scale: false,
    short_names: &["hc", "hcs"],
};

pub static NODE_POOLS: ResourceType = ResourceType {
    group: HYPERSHIFT_GROUP,
    version: HYPERSHIFT_VERSION,
    plural: "nodepools",
    singular: "nodepool",
    kind: "NodePool",
    namespaced: true,
    status: true,
    scale: true,
    short_names: &["np", "nps"],
};

pub static ALL: [&ResourceType; 6] = [
    &NAMESPACES,
    &SECRETS,
    &CONFIG_MAPS,
    &HOSTED_CLUSTERS,
    &NODE_POOLS,
    &DEPLOYMENTS,
];

impl ResourceType {
    /// `v1` or `hypershift.openshift.io/v1beta1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `secrets` or `hostedclusters.hypershift.openshift.io`: how messages name it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Secret` or `HostedCluster.hypershift.openshift.io`: how an Invalid error names
    /// the kind (`schema.GroupKind`'s `String`).
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_owned()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The type served at this group, version and plural.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
        ALL.iter()
            .copied()
            .find(|rt| rt.group == group && rt.version == version && rt.plural == plural)
    }
}
