//! Every AWS activity by its type name: what a worker registers, and the one place that
//! maps a name (`aws.create_vpc`) to its implementation.

use std::sync::Arc;

use hcpflow_engine::{Activity, ActivityFailure, SealKeys};
use hcpflow_hypershift::aws::dns::*;
use hcpflow_hypershift::aws::guest::*;
use hcpflow_hypershift::aws::iam::*;
use hcpflow_hypershift::aws::network::*;
use hcpflow_hypershift::aws::observed_privatelink::*;
use hcpflow_hypershift::aws::oidc::*;
use hcpflow_hypershift::aws::prerequisites::*;
use hcpflow_hypershift::aws::privatelink::*;
use hcpflow_hypershift::aws::sweep::*;
use hcpflow_hypershift::aws::target::{AwsTarget, TARGET_FIELD};
use hcpflow_hypershift::aws::Delete;
use hcpflow_hypershift::aws_accounts::AwsAccounts;
use serde_json::Value;

use crate::accounts::AccountClients;
use crate::clients::AwsClients;
use crate::scope::Scope;
use crate::{
    ec2, guest, iam, observed_privatelink, oidc, prerequisites, privatelink, route53, sweep,
};

/// The AWS activities of one process: the clients of a call's target (the hosted
/// cluster's account and the management side's, in the target's region; the server's
/// own where the call names no target), and the seal keys the signing-key activity
/// seals with.
#[derive(Debug, Clone)]
pub struct AwsActivities {
    /// Where the hosted cluster's objects are.
    pub clients: AwsClients,
    /// Where the management side's objects are: the OIDC bucket, the management VPC,
    /// the operator's load balancer and endpoint service.
    pub management: AwsClients,
    pub seal_keys: Option<Arc<SealKeys>>,
    accounts: Arc<AccountClients>,
}

/// `activities! { Request => |this, scope, request| future; ... }` (`this`: the
/// [`AwsActivities`]): the list of type
/// names and the dispatch over them, from one table.
macro_rules! activities {
    ($( $request:ty => |$aws:ident, $scope:ident, $req:ident| $call:expr; )*) => {
        /// Every AWS activity type this crate implements.
        pub const TYPES: &[&str] = &[$(<$request as Activity>::TYPE),*];

        impl AwsActivities {
    /// The activities of a server acting in its own account only.
    pub fn new(clients: AwsClients, seal_keys: Option<Arc<SealKeys>>) -> Self {
        Self::with_accounts(clients, AwsAccounts::default(), seal_keys)
    }

    /// The activities of a server that may act in `accounts` too, by assuming their
    /// roles with `clients`' credentials.
    pub fn with_accounts(
        clients: AwsClients,
        accounts: AwsAccounts,
        seal_keys: Option<Arc<SealKeys>>,
    ) -> Self {
        Self {
            management: clients.clone(),
            accounts: AccountClients::new(clients.clone(), accounts),
            clients,
            seal_keys,
        }
    }

    /// These activities as a call's input targets them: its `aws_target` is taken out
    /// of the input, and the clients are the target's accounts' in its region (recorded
    /// calls without a target use this process's own).
    async fn targeted(&self, input: &mut Value) -> Result<AwsActivities, ActivityFailure> {
        let Some(target) = input.as_object_mut().and_then(|o| o.remove(TARGET_FIELD)) else {
            return Ok(self.clone());
        };
        let target: AwsTarget = serde_json::from_value(target).map_err(|e| {
            ActivityFailure::permanent("InvalidInput", format!("{TARGET_FIELD}: {e}"))
        })?;
        let accounts = &self.accounts;
        Ok(AwsActivities {
            clients: accounts
                .clients(target.account.as_deref(), &target.region)
                .await?,
            management: accounts
                .clients(target.management_account.as_deref(), &target.region)
                .await?,
            ..self.clone()
        })
    }

            /// Runs the activity `activity_type` on `input`.
            pub async fn run(&self, activity_type: &str, scope: &Scope<'_>, mut input: Value) -> Result<Value, ActivityFailure> {
                let targeted = self.targeted(&mut input).await?;
                let scope = &Scope { region: &targeted.clients.region, ..*scope };
                $(
                    if activity_type == <$request as Activity>::TYPE {
                        let $req: $request = ActivityFailure::decode_input(activity_type, input)?;
                        let $aws = &targeted;
                        let $scope = scope;
                        return ActivityFailure::encode_output($call.await?);
                    }
                )*
                Err(ActivityFailure::permanent(
                    "UnknownActivity",
                    format!("{activity_type} is not an AWS activity"),
                ))
            }
        }
    };
}

activities! {
    CreateVpc => |aws, scope, r| ec2::vpc::create_vpc(&aws.clients, scope, &r);
    Delete<Vpc> => |aws, scope, r| ec2::vpc::delete_vpc(&aws.clients, scope, &r.0);
    CreateDhcpOptions => |aws, scope, r| ec2::dhcp::create_dhcp_options(&aws.clients, scope, &r);
    Delete<DhcpOptions> => |aws, scope, r| ec2::dhcp::delete_dhcp_options(&aws.clients, scope, &r.0);
    CreateInternetGateway => |aws, scope, r| ec2::internet_gateway::create_internet_gateway(&aws.clients, scope, &r);
    Delete<InternetGateway> => |aws, scope, r| ec2::internet_gateway::delete_internet_gateway(&aws.clients, scope, &r.0);
    CreateSubnet => |aws, scope, r| ec2::subnet::create_subnet(&aws.clients, scope, &r);
    Delete<Subnet> => |aws, scope, r| ec2::subnet::delete_subnet(&aws.clients, scope, &r.0);
    CreateNatGateway => |aws, scope, r| ec2::nat_gateway::create_nat_gateway(&aws.clients, scope, &r);
    Delete<NatGateway> => |aws, scope, r| ec2::nat_gateway::delete_nat_gateway(&aws.clients, scope, &r.0);
    CreateRouteTable => |aws, scope, r| ec2::route_table::create_route_table(&aws.clients, scope, &r);
    Delete<RouteTable> => |aws, scope, r| ec2::route_table::delete_route_table(&aws.clients, scope, &r.0);
    CreateS3Endpoint => |aws, scope, r| ec2::s3_endpoint::create_s3_endpoint(&aws.clients, scope, &r);
    Delete<S3Endpoint> => |aws, scope, r| ec2::s3_endpoint::delete_s3_endpoint(&aws.clients, scope, &r.0);
    FindPublicZone => |aws, _scope, r| route53::public_zone::find_public_zone(&aws.clients, &r);
    CheckPrerequisites => |aws, _scope, r| prerequisites::check_prerequisites(&aws.management, &r);
    CreatePrivateZone => |aws, scope, r| route53::zone::create_private_zone(&aws.clients, scope, &r);
    Delete<HostedZone> => |aws, scope, r| route53::zone::delete_zone(&aws.clients, scope, &r.0);
    Cname => |aws, scope, r| route53::records::upsert_cname(&aws.clients, scope, &r);
    Delete<Cname> => |aws, scope, r| route53::records::delete_cname(&aws.clients, scope, &r.0);
    GenerateSigningKey => |this, scope, _r| this.generate_signing_key(scope);
    PublishOidcDocuments => |aws, scope, r| oidc::documents::publish_oidc_documents(&aws.management, scope, &r);
    Delete<OidcDocuments> => |aws, scope, r| oidc::documents::delete_oidc_documents(&aws.management, scope, &r.0);
    CreateOidcProvider => |aws, scope, r| iam::oidc_provider::create_oidc_provider(&aws.clients, scope, &r);
    Delete<OidcProvider> => |aws, scope, r| iam::oidc_provider::delete_oidc_provider(&aws.clients, scope, &r.0);
    CreateOperatorRole => |aws, scope, r| iam::operator_role::create_operator_role(&aws.clients, scope, &r);
    Delete<Role> => |aws, scope, r| iam::role::delete_role(&aws.clients, scope, &r.0);
    CreateWorkerProfile => |aws, scope, r| iam::worker::create_worker_profile(&aws.clients, scope, &r);
    Delete<WorkerProfile> => |aws, scope, r| iam::worker::delete_worker_profile(&aws.clients, scope, &r.0);
    CreateLoadBalancer => |aws, scope, r| privatelink::load_balancer::create_load_balancer(&aws.management, scope, &r);
    Delete<LoadBalancer> => |aws, scope, r| privatelink::load_balancer::delete_load_balancer(&aws.management, scope, &r.0);
    CreateEndpointService => |aws, scope, r| privatelink::endpoint_service::create_endpoint_service(&aws.management, scope, &r);
    Delete<EndpointService> => |aws, scope, r| privatelink::endpoint_service::delete_endpoint_service(&aws.management, scope, &r.0);
    CreateEndpointSecurityGroup => |aws, scope, r| privatelink::security_group::create_endpoint_security_group(&aws.clients, scope, &r);
    Delete<SecurityGroup> => |aws, scope, r| privatelink::security_group::delete_security_group(&aws.clients, scope, &r.0);
    CheckZoneOffer => |aws, _scope, r| privatelink::zone_offer::check_zone_offer(&aws.clients, &r);
    CreateInterfaceEndpoint => |aws, scope, r| privatelink::interface_endpoint::create_interface_endpoint(&aws.clients, scope, &r);
    Delete<InterfaceEndpoint> => |aws, scope, r| privatelink::interface_endpoint::delete_interface_endpoint(&aws.clients, scope, &r.0);
    WaitEndpointZone => |aws, _scope, r| privatelink::interface_endpoint::wait_endpoint_zone(&aws.clients, &r);
    CheckZoneCoverage => |aws, _scope, r| observed_privatelink::coverage::check_zone_coverage(&aws.clients, &aws.management, &r);
    WaitPrivateLinkZone => |aws, scope, r| observed_privatelink::endpoints::wait_privatelink_zone(&aws.clients, scope, &r);
    WaitPrivateLinkRecords => |aws, scope, r| observed_privatelink::records::wait_privatelink_records(&aws.clients, scope, &r);
    AwaitPrivateLinkRemoved => |aws, _scope, r| observed_privatelink::removal::await_privatelink_removed(&aws.clients, &r);
    DeleteGuestResources => |aws, scope, r| guest::delete_guest_resources(&aws.clients, scope, &r);
    FindLeftovers => |aws, _scope, r| sweep::find_leftovers(&aws.clients, &aws.management, &r);
}

impl AwsActivities {
    /// RSA key generation takes tens to hundreds of milliseconds of CPU: it runs on a
    /// blocking thread, not on the async workers every other task shares.
    async fn generate_signing_key(&self, scope: &Scope<'_>) -> Result<SigningKey, ActivityFailure> {
        let keyring = self
            .seal_keys
            .as_ref()
            .map(|keys| keys.current())
            .ok_or_else(|| {
                ActivityFailure::permanent(
                "NoSealKey",
                "generating the service-account signing key needs a seal key: set HCPFLOW_SEAL_KEY",
            )
            })?;
        let workflow_id = scope.workflow_id.clone();
        tokio::task::spawn_blocking(move || {
            oidc::signing_key::generate_signing_key(&keyring, &workflow_id)
        })
        .await
        .map_err(|e| ActivityFailure::retryable("KeyGeneration", e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_type_name_is_distinct_and_namespaced() {
        let mut names = super::TYPES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), super::TYPES.len());
        assert!(names.iter().all(|n| n.starts_with("aws.")));
        assert_eq!(names.len(), 45);
    }
}
