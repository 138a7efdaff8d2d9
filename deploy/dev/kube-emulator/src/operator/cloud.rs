//! The operators' cloud side, against an AWS endpoint (moto in the dev stack): what the
//! real HyperShift operators make in AWS for a HostedCluster, and remove when it is
//! deleted. One component per file, each naming the real code it follows:
//!
//! - `identity`: the control-plane-operator's health check of its web identity
//!   (`ValidAWSIdentityProvider`), once the API server is up, and what STS checks before
//!   it lets the CPO assume its role;
//! - `default_security_group`: the control-plane-operator's default worker security
//!   group (`AWSDefaultSecurityGroupCreated`, `status.platform.aws.
//!   defaultWorkerSecurityGroupID`), once `ValidAWSIdentityProvider` is True (the CPO
//!   skips it until then; its identity check needs the API server);
//! - for a PublicAndPrivate or Private cluster, per private Service (`spec`):
//!   `load_balancer` (the management cluster's cloud provider: an internal NLB),
//!   `endpoint_service` (the hypershift-operator: a VPC endpoint service allowing the
//!   CPO's role, `AWSEndpointServiceAvailable`), `endpoint` and `records` (the CPO: the
//!   endpoint security group, the interface endpoint in the NodePools' zones, the
//!   `api` / `*.apps` CNAMEs, `AWSEndpointAvailable`), summed up on the HostedCluster
//!   as its controller does (`conditions`);
//! - `guest`: the guest cluster's own resources once it has nodes — the router's
//!   classic ELB and its security group, the public `*.apps` record, a workload's
//!   network load balancer, a persistent volume's EBS volume, the image registry's
//!   bucket;
//! - `cleanup`: on deletion, before the finalizer goes, PrivateLink removed always; the
//!   default security group and the guest's resources only for a HostedCluster
//!   annotated `hypershift.openshift.io/cleanup-cloud-resources: "true"`
//!   (`AWSDefaultSecurityGroupDeleted`, `CloudResourcesDestroyed`), as the control plane
//!   does;
//! - `iam`: the CPO acts with its role's permissions as stored in IAM.
//!
//! Only a HostedCluster the hypershift-operator reconciles gets any of it:
//! `ValidConfiguration` and `SupportedHostedCluster` True (a blocked one has no control
//! plane), and a hosted control plane made (one whose pull secret was missing from the
//! start has none: `Degraded` Unknown). The Available sequence does not wait for any
//! of it; NodePools wait for the default security group's id (the simulated operator's
//! NodePool controller: see [`crate::operator`]).
//!
//! The loop: every `period`, a snapshot of the HostedClusters and NodePools is taken
//! under the store's lock; the AWS work runs without it (describe before create:
//! moto ignores client tokens); the conditions are written back under the lock, merged
//! by type — the simulated operator's own conditions are left alone, and it leaves the
//! types in [`CONDITIONS`] alone. A HostedCluster whose inputs did not change is looked
//! at again after a failure (backing off from `period` to 5 s) or, once all is well,
//! every 30 s.

mod aws;
mod cleanup;
mod conditions;
mod default_security_group;
mod endpoint;
mod endpoint_service;
mod guest;
mod iam;
mod identity;
mod load_balancer;
mod records;
mod spec;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http::Shared;
use crate::resources::{HOSTED_CLUSTERS, NODE_POOLS};
use crate::store::{meta, Part};

use aws::Clients;
use conditions::{condition, summed, ENDPOINT_AVAILABLE, ENDPOINT_SERVICE_AVAILABLE};
use spec::Cluster;

pub use conditions::{
    ALL_IS_WELL, SECURITY_GROUP_CREATED, STATUS_UNKNOWN, VALID_IDENTITY_PROVIDER,
};
pub use identity::KUBE_API_SERVER_UNAVAILABLE;

/// The HostedCluster conditions the cloud side owns (without it, the simulated operator
/// sets `ValidAWSIdentityProvider` and `AWSDefaultSecurityGroupCreated` itself).
pub const CONDITIONS: [&str; 6] = [
    conditions::VALID_IDENTITY_PROVIDER,
    conditions::SECURITY_GROUP_CREATED,
    conditions::SECURITY_GROUP_DELETED,
    conditions::ENDPOINT_AVAILABLE,
    conditions::ENDPOINT_SERVICE_AVAILABLE,
    conditions::CLOUD_RESOURCES_DESTROYED,
];

/// `hyperv1.CleanupCloudResourcesAnnotation`: `"true"` on a HostedCluster has its control
/// plane remove the default security group and the guest's cloud resources when it is
/// deleted.
pub const CLEANUP_CLOUD_RESOURCES: &str = "hypershift.openshift.io/cleanup-cloud-resources";

/// The real control plane's `resourceDeletionTimeout` is 10 minutes; the emulator's
/// default is short.
pub const GUEST_CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the cloud side works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The AWS endpoint (moto's URL).
    pub endpoint: String,
    pub region: String,
    /// The management cluster's name: its subnets are tagged
    /// `kubernetes.io/cluster/<name>`, and so are its load balancers.
    pub management_cluster: String,
    /// Between two passes.
    pub period: Duration,
    /// How long the control plane waits for the guest's cloud resources to go before it
    /// gives up (`resourceDeletionTimeout`; [`GUEST_CLEANUP_TIMEOUT`] by default).
    pub guest_cleanup_timeout: Duration,
}

/// Which deleted HostedClusters (by uid) the cloud side has cleaned up after: the
/// simulated operator keeps their finalizer until then.
#[derive(Debug, Clone, Default)]
pub struct CleanupGate {
    done: Arc<Mutex<HashSet<String>>>,
}

impl CleanupGate {
    pub fn is_done(&self, uid: &str) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(uid)
    }

    fn mark(&self, uid: &str) {
        self.done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(uid.to_owned());
    }
}

/// One private Service's state, as its AWSEndpointService would hold it.
#[derive(Debug, Clone, Default)]
struct Published {
    /// The load balancer exists: the AWSEndpointService does.
    exists: bool,
    /// `AWSEndpointServiceAvailable` (the hypershift-operator's).
    service: Option<Result<(), String>>,
    /// `AWSEndpointAvailable` (the control-plane-operator's).
    endpoint: Option<Result<(), String>>,
}

/// What the cloud side remembers of one HostedCluster.
#[derive(Debug)]
struct Memory {
    inputs: String,
    next: Instant,
    backoff: Duration,
    published: BTreeMap<&'static str, Published>,
    deleted_at: Option<Instant>,
    guest_cleanup: cleanup::GuestCleanup,
}

/// The cloud side's loop state.
#[derive(Debug)]
pub struct Cloud {
    settings: Settings,
    clients: Clients,
    /// Clients of the control planes, by (region, control-plane-operator role): each
    /// works in its cluster's region (`spec.platform.aws.region`) and account (its
    /// role's).
    control_planes: HashMap<(String, String), Clients>,
    gate: CleanupGate,
    memory: HashMap<String, Memory>,
    /// Subnet id → availability zone (`deduplicateSubnetsByAZ`'s cache).
    zones: HashMap<String, String>,
}

const RESYNC: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Cloud {
    pub async fn new(settings: Settings, gate: CleanupGate) -> Self {
        let clients = Clients::connect(&settings).await;
        Self {
            settings,
            clients,
            control_planes: HashMap::new(),
            gate,
            memory: HashMap::new(),
            zones: HashMap::new(),
        }
    }

    /// Runs passes until the process ends.
    pub async fn run(mut self, shared: Shared) {
        let mut tick = tokio::time::interval(self.settings.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.pass(&shared).await;
        }
    }

    /// One look at every HostedCluster.
    pub async fn pass(&mut self, shared: &Shared) {
        let (clusters, pools) =
            shared.with(|store| (store.all_of(&HOSTED_CLUSTERS), store.all_of(&NODE_POOLS)));
        let pools: Vec<Value> = pools.into_iter().map(|(_, pool)| pool).collect();
        let mut roles = iam::Roles::default();
        let mut seen = HashSet::new();
        let mut live_control_planes = HashSet::new();
        for (_, object) in clusters {
            let cluster = Cluster::read(&object, &pools);
            seen.insert(cluster.uid.clone());
            live_control_planes.insert(self.control_plane_key(&cluster));
            if cluster.deleting {
                if meta(&object)
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty())
                {
                    self.delete(shared, &cluster, &mut roles).await;
                }
            } else if cluster.aws {
                self.reconcile(shared, &cluster, &mut roles).await;
            }
        }
        self.memory.retain(|uid, _| seen.contains(uid));
        // Control planes of clusters gone need no clients.
        self.control_planes
            .retain(|key, _| live_control_planes.contains(key));
    }

    /// The clients of `cluster`'s control plane: in its region (the management
    /// cluster's own when it names none), acting as its control-plane-operator role, so
    /// in the hosted cluster's account, which may not be the management cluster's
    /// (without a role, the management cluster's own credentials).
    async fn clients_for(&mut self, cluster: &Cluster) -> Clients {
        let key = self.control_plane_key(cluster);
        let region = key.0.clone();
        if let Some(clients) = self.control_planes.get(&key) {
            return clients.clone();
        }
        let in_region = if region == self.settings.region {
            self.clients.clone()
        } else {
            Clients::connect(&Settings {
                region,
                ..self.settings.clone()
            })
            .await
        };
        let clients = if cluster.cpo_role_arn.starts_with("arn:") {
            in_region.assuming(&cluster.cpo_role_arn).await
        } else {
            in_region
        };
        self.control_planes.insert(key, clients.clone());
        clients
    }

    /// Which clients a cluster's control plane uses: its region (the management
    /// cluster's when it names none) and its control-plane-operator role.
    fn control_plane_key(&self, cluster: &Cluster) -> (String, String) {
        let region = match cluster.region.as_str() {
            "" => self.settings.region.clone(),
            region => region.to_owned(),
        };
        (region, cluster.cpo_role_arn.clone())
    }

    fn inputs(cluster: &Cluster) -> String {
        let watched: Vec<String> = [
            "ValidConfiguration",
            "SupportedHostedCluster",
            "KubeAPIServerAvailable",
        ]
        .iter()
        .map(|kind| format!("{kind}={}", cluster.is(kind, "True")))
        .collect();
        format!(
            "{}|{}|{}|{}|{:?}|{:?}|{}|{}",
            cluster.generation,
            cluster.deleting,
            cluster.reconciled(),
            watched.join(","),
            cluster.node_pool_subnets,
            cluster.default_security_group,
            cluster.guest_running(),
            cluster.cleanup_cloud_resources
        )
    }

    /// Whether `cluster` is due; makes its memory.
    fn due(&mut self, cluster: &Cluster) -> bool {
        let inputs = Self::inputs(cluster);
        let period = self.settings.period;
        let memory = self
            .memory
            .entry(cluster.uid.clone())
            .or_insert_with(|| Memory {
                inputs: String::new(),
                next: Instant::now(),
                backoff: period,
                published: BTreeMap::new(),
                deleted_at: None,
                guest_cleanup: cleanup::GuestCleanup::default(),
            });
        if memory.inputs != inputs {
            memory.inputs = inputs;
            memory.next = Instant::now();
            memory.backoff = period;
        }
        Instant::now() >= memory.next
    }

    fn schedule(&mut self, cluster: &Cluster, all_well: bool) {
        let period = self.settings.period;
        if let Some(memory) = self.memory.get_mut(&cluster.uid) {
            if all_well {
                memory.next = Instant::now() + RESYNC;
                memory.backoff = period;
            } else {
                memory.next = Instant::now() + memory.backoff;
                memory.backoff = (memory.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    async fn reconcile(&mut self, shared: &Shared, cluster: &Cluster, roles: &mut iam::Roles) {
        if !self.due(cluster) {
            return;
        }
        let clients = self.clients_for(cluster).await;
        let reconciled = cluster.reconciled();
        let mut written = Vec::new();
        let mut security_group = None;
        let mut all_well = true;
        if reconciled {
            let cpo = roles
                .cpo(&clients, &cluster.cpo_role_arn, &cluster.issuer_url)
                .await;
            let api_up = cluster.is("KubeAPIServerAvailable", "True");
            let identity = identity::health_check(&clients, &cpo, cluster).await;
            let valid_identity = identity["status"] == "True";
            if api_up && !valid_identity {
                tracing::warn!(cluster = %cluster.name, condition = %identity,
                               "the control-plane-operator's identity provider is not valid");
                all_well = false;
            }
            written.push(identity);
            // "Identity provider not ready. Skipping security group creation."
            if cluster.default_security_group.is_none() && api_up && valid_identity {
                match default_security_group::ensure(&clients, &cpo, cluster).await {
                    Ok(id) => {
                        tracing::info!(cluster = %cluster.name, group = %id, "default security group ready");
                        written.push(condition(
                            SECURITY_GROUP_CREATED,
                            "True",
                            "AsExpected",
                            ALL_IS_WELL,
                            cluster.generation,
                        ));
                        security_group = Some(id);
                    }
                    Err(message) => {
                        tracing::warn!(cluster = %cluster.name, %message, "default security group");
                        all_well = false;
                        written.push(condition(
                            SECURITY_GROUP_CREATED,
                            "False",
                            "AWSError",
                            &message,
                            cluster.generation,
                        ));
                    }
                }
            }
            all_well &= self.publish(cluster, &cpo).await;
            if cluster.guest_running() {
                if let Err(message) = guest::ensure(&clients, cluster, &clients.region).await {
                    tracing::warn!(cluster = %cluster.name, %message, "the guest's cloud resources");
                    all_well = false;
                }
            }
        }
        let published: Vec<Published> = self
            .memory
            .get(&cluster.uid)
            .map(|m| m.published.values().cloned().collect())
            .unwrap_or_default();
        let services: Vec<Option<Result<(), String>>> = published
            .iter()
            .filter(|p| p.exists)
            .map(|p| p.service.clone())
            .collect();
        let endpoints: Vec<Option<Result<(), String>>> = published
            .iter()
            .filter(|p| p.exists)
            .map(|p| p.endpoint.clone())
            .collect();
        written.push(summed(
            ENDPOINT_SERVICE_AVAILABLE,
            &services,
            cluster.generation,
        ));
        written.push(summed(ENDPOINT_AVAILABLE, &endpoints, cluster.generation));
        write(shared, cluster, written, security_group);
        self.schedule(cluster, all_well || !reconciled);
    }

    /// PrivateLink for each private Service; whether all of it is well. The load
    /// balancer and endpoint service are the hypershift-operator's, in the management
    /// cluster's region (its own `AWS_REGION`); the endpoint is the control-plane-
    /// operator's, in the cluster's (`spec.platform.aws.region`).
    async fn publish(&mut self, cluster: &Cluster, cpo: &iam::Cpo) -> bool {
        let mut all_well = true;
        let guest_side = self.clients_for(cluster).await;
        let clients = self.clients.clone();
        let management = self.settings.management_cluster.clone();
        for service in cluster.private_services() {
            let mut state = self
                .memory
                .get(&cluster.uid)
                .and_then(|m| m.published.get(service.name).cloned())
                .unwrap_or_default();
            match load_balancer::ensure(&clients, &management, cluster, &service).await {
                Err(message) => {
                    tracing::warn!(cluster = %cluster.name, service = service.name, %message,
                                   "the management cluster's cloud provider cannot make the load balancer");
                    all_well = false;
                }
                Ok(()) => {
                    state.exists = true;
                    match endpoint_service::ensure(&clients, cluster, &service).await {
                        Err(message) => {
                            all_well = false;
                            state.service = Some(Err(message));
                        }
                        Ok(name) => {
                            state.service = Some(Ok(()));
                            let result = endpoint::ensure(
                                &guest_side,
                                cpo,
                                cluster,
                                &service,
                                &name,
                                &mut self.zones,
                            )
                            .await;
                            if let Err(message) = &result {
                                tracing::warn!(cluster = %cluster.name, service = service.name, %message,
                                               "the control-plane-operator's endpoint");
                                all_well = false;
                            }
                            state.endpoint = Some(result);
                        }
                    }
                }
            }
            if let Some(memory) = self.memory.get_mut(&cluster.uid) {
                memory.published.insert(service.name, state);
            }
        }
        all_well
    }

    async fn delete(&mut self, shared: &Shared, cluster: &Cluster, roles: &mut iam::Roles) {
        if self.gate.is_done(&cluster.uid) || !self.due(cluster) {
            return;
        }
        let clients = self.clients_for(cluster).await;
        let cpo = roles
            .cpo(&clients, &cluster.cpo_role_arn, &cluster.issuer_url)
            .await;
        let timeout = self.settings.guest_cleanup_timeout;
        let mut fresh = cleanup::GuestCleanup::default();
        let deletion = match self.memory.get_mut(&cluster.uid) {
            Some(memory) => cleanup::Deletion {
                since: *memory.deleted_at.get_or_insert_with(Instant::now),
                guest: &mut memory.guest_cleanup,
                timeout,
            },
            None => cleanup::Deletion {
                since: Instant::now(),
                guest: &mut fresh,
                timeout,
            },
        };
        let management = self.clients.clone();
        let progress = cleanup::run(&clients, &management, &cpo, cluster, deletion).await;
        if !progress.conditions.is_empty() {
            write(shared, cluster, progress.conditions, None);
        }
        if progress.done {
            tracing::info!(cluster = %cluster.name, "the operators' cleanup is through");
            self.gate.mark(&cluster.uid);
        } else {
            if let Some(problem) = &progress.problem {
                tracing::warn!(cluster = %cluster.name, %problem, "cleanup not done yet");
            }
            self.schedule(cluster, false);
        }
    }
}

/// Writes the cloud side's conditions (and the default security group's id) into the
/// HostedCluster's status, if it is still the same object.
fn write(shared: &Shared, cluster: &Cluster, written: Vec<Value>, security_group: Option<String>) {
    shared.with(|store| {
        let Ok(object) = store.get(&HOSTED_CLUSTERS, Some(&cluster.namespace), &cluster.name)
        else {
            return;
        };
        if meta(&object).get("uid").and_then(Value::as_str) != Some(cluster.uid.as_str()) {
            return;
        }
        let mut status = object.get("status").cloned().unwrap_or_else(|| json!({}));
        let before = status.clone();
        conditions::merge(&mut status, written);
        if let Some(id) = security_group {
            status["platform"]["aws"]["defaultWorkerSecurityGroupID"] = json!(id);
        }
        if status != before {
            let mut next = object;
            next["status"] = status;
            let _ = store.update(
                &HOSTED_CLUSTERS,
                Some(&cluster.namespace),
                &cluster.name,
                next,
                Part::Status,
            );
        }
    });
}
