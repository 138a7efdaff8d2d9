//! The guest cluster's cloud resources against the dev stack's moto
//! (`HCPFLOW_DEV_MOTO_ENDPOINT`; skipped without it, a failure under `make test`): two
//! Public HostedClusters whose NodePools get a node make the router's classic ELB and
//! its security group, the public `*.apps` record, a workload's NLB and target group,
//! an EBS volume and the image registry's bucket — once, even across an emulator
//! restart. Deleted with `hypershift.openshift.io/cleanup-cloud-resources: "true"`, the
//! first takes all of it (and its default security group) along, reporting
//! `CloudResourcesDestroyed`; deleted without, the second leaves all of it in moto, as
//! the real control plane does (the test removes it itself). Every name is this run's
//! own; moto is never reset.

use std::time::Duration;

use aws_sdk_ec2::types::ResourceType;
use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch, RrType};
use hcpflow_kube_emulator::operator::cloud::{Settings, CLEANUP_CLOUD_RESOURCES};
use hcpflow_kube_emulator::server::Install;
use serde_json::json;

use crate::cloud::*;
use crate::support::*;

/// What one guest cluster made, as found in moto.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Guest {
    elb: String,
    elb_dns: String,
    elb_group: String,
    nlb_arn: String,
    target_group_arn: String,
    volume: String,
    bucket: String,
    record: Option<String>,
    default_group: Option<String>,
}

fn tag_is(tags: &[(String, String)], key: &str, value: &str) -> bool {
    tags.iter().any(|(k, v)| k == key && v == value)
}

/// The classic ELBs in `vpc` tagged for `infra`'s `service`: (name, DNS name,
/// subnets, security groups, listener ports, instances).
async fn classic_load_balancers(
    moto: &Moto,
    vpc: &str,
    infra: &str,
    service: &str,
) -> Vec<(String, String, Vec<String>, Vec<String>, Vec<i32>, usize)> {
    let all = moto.elb.describe_load_balancers().send().await.unwrap();
    let mut found = Vec::new();
    for lb in all.load_balancer_descriptions() {
        if lb.vpc_id() != Some(vpc) {
            continue;
        }
        let name = lb.load_balancer_name().unwrap().to_owned();
        let described = moto
            .elb
            .describe_tags()
            .load_balancer_names(&name)
            .send()
            .await
            .unwrap();
        let tags: Vec<(String, String)> = described
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .map(|t| (t.key().to_owned(), t.value().unwrap_or_default().to_owned()))
            .collect();
        if !tag_is(&tags, &format!("kubernetes.io/cluster/{infra}"), "owned")
            || !tag_is(&tags, "kubernetes.io/service-name", service)
        {
            continue;
        }
        let mut subnets = lb.subnets().to_vec();
        subnets.sort();
        let mut ports: Vec<i32> = lb
            .listener_descriptions()
            .iter()
            .filter_map(|d| d.listener())
            .map(|l| l.load_balancer_port())
            .collect();
        ports.sort_unstable();
        found.push((
            name,
            lb.dns_name().unwrap_or_default().to_owned(),
            subnets,
            lb.security_groups().to_vec(),
            ports,
            lb.instances().len(),
        ));
    }
    found
}

/// The v2 ELB resources (load balancers or target groups) among `arns` tagged for
/// `infra`'s `service`.
async fn tagged_v2(moto: &Moto, arns: Vec<String>, infra: &str, service: &str) -> Vec<String> {
    let mut found = Vec::new();
    for arn in arns {
        let described = moto
            .elbv2
            .describe_tags()
            .resource_arns(&arn)
            .send()
            .await
            .unwrap();
        let tags: Vec<(String, String)> = described
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .map(|t| {
                (
                    t.key().unwrap_or_default().to_owned(),
                    t.value().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        if tag_is(&tags, &format!("kubernetes.io/cluster/{infra}"), "owned")
            && tag_is(&tags, "kubernetes.io/service-name", service)
        {
            found.push(arn);
        }
    }
    found
}

/// The network load balancers in `vpc` of `infra`'s `default/guest-app`, with their
/// target groups.
async fn network_load_balancers(moto: &Moto, vpc: &str, infra: &str) -> (Vec<String>, Vec<String>) {
    let all = moto.elbv2.describe_load_balancers().send().await.unwrap();
    let arns: Vec<String> = all
        .load_balancers()
        .iter()
        .filter(|lb| lb.vpc_id() == Some(vpc))
        .filter(|lb| lb.r#type().map(|t| t.as_str()) == Some("network"))
        .filter_map(|lb| lb.load_balancer_arn().map(str::to_owned))
        .collect();
    let lbs = tagged_v2(moto, arns, infra, "default/guest-app").await;
    let groups = moto.elbv2.describe_target_groups().send().await.unwrap();
    let group_arns: Vec<String> = groups
        .target_groups()
        .iter()
        .filter(|tg| tg.vpc_id() == Some(vpc))
        .filter_map(|tg| tg.target_group_arn().map(str::to_owned))
        .collect();
    let tgs = tagged_v2(moto, group_arns, infra, "default/guest-app").await;
    (lbs, tgs)
}

/// The live volumes of `infra`: (id, size, type, zone, tags).
async fn volumes(
    moto: &Moto,
    infra: &str,
) -> Vec<(String, i32, String, String, Vec<(String, String)>)> {
    let found = moto
        .ec2
        .describe_volumes()
        .filters(filter(
            &format!("tag:kubernetes.io/cluster/{infra}"),
            "owned",
        ))
        .send()
        .await
        .unwrap();
    found
        .volumes()
        .iter()
        .filter(|v| !matches!(v.state().map(|s| s.as_str()), Some("deleting" | "deleted")))
        .map(|v| {
            (
                v.volume_id().unwrap().to_owned(),
                v.size().unwrap_or_default(),
                v.volume_type()
                    .map(|t| t.as_str().to_owned())
                    .unwrap_or_default(),
                v.availability_zone().unwrap_or_default().to_owned(),
                v.tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_owned(),
                            t.value().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

/// `infra`'s registry buckets (`destroy infra`'s prefix).
async fn buckets(moto: &Moto, infra: &str) -> Vec<String> {
    let listed = moto.s3.list_buckets().send().await.unwrap();
    listed
        .buckets()
        .iter()
        .filter_map(|b| b.name())
        .filter(|name| name.starts_with(&format!("{infra}-image-registry-")))
        .map(str::to_owned)
        .collect()
}

/// The CNAME `name` in `zone`, with its value.
async fn record(moto: &Moto, zone: &str, name: &str) -> Option<String> {
    let listed = moto
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .unwrap();
    listed
        .resource_record_sets()
        .iter()
        .find(|r| {
            r.r#type() == &RrType::Cname
                && r.name().trim_end_matches('.').replace("\\052", "*") == name
        })
        .and_then(|r| r.resource_records().first())
        .map(|r| r.value().to_owned())
}

struct Where<'a> {
    vpc: &'a str,
    public_subnets: &'a [String],
    zone_id: &'a str,
    domain: &'a str,
}

/// Everything one guest made, checked in detail; `Err` while something is missing (or
/// made twice).
async fn guest_resources(
    moto: &Moto,
    place: &Where<'_>,
    name: &str,
    infra: &str,
) -> Result<Guest, String> {
    let elbs =
        classic_load_balancers(moto, place.vpc, infra, "openshift-ingress/router-default").await;
    let [(elb, elb_dns, subnets, groups, ports, instances)] = elbs.as_slice() else {
        return Err(format!("router ELBs: {elbs:?}"));
    };
    assert!(elb.starts_with('a') && elb.len() == 32, "{elb}");
    assert_eq!(
        subnets.as_slice(),
        place.public_subnets,
        "in the public subnets"
    );
    assert_eq!(ports, &[80, 443]);
    assert_eq!(*instances, 0);
    let elb_group = moto
        .ec2
        .describe_security_groups()
        .filters(filter("group-name", &format!("k8s-elb-{elb}")))
        .filters(filter("vpc-id", place.vpc))
        .send()
        .await
        .unwrap()
        .security_groups()
        .first()
        .cloned()
        .ok_or("no k8s-elb security group")?;
    let cluster_tag = format!("kubernetes.io/cluster/{infra}");
    assert!(elb_group
        .tags()
        .iter()
        .any(|t| t.key() == Some(cluster_tag.as_str()) && t.value() == Some("owned")));
    assert_eq!(
        groups.as_slice(),
        [elb_group.group_id().unwrap().to_owned()]
    );
    assert!(elb_group
        .ip_permissions()
        .iter()
        .any(|p| p.from_port() == Some(443)));

    let (nlbs, tgs) = network_load_balancers(moto, place.vpc, infra).await;
    let ([nlb], [tg]) = (nlbs.as_slice(), tgs.as_slice()) else {
        return Err(format!("NLBs {nlbs:?}, target groups {tgs:?}"));
    };
    let listeners = moto
        .elbv2
        .describe_listeners()
        .load_balancer_arn(nlb)
        .send()
        .await
        .unwrap();
    let Some(listener) = listeners.listeners().first() else {
        return Err("no NLB listener yet".into());
    };
    assert_eq!(listener.port(), Some(80));
    assert_eq!(
        listener.default_actions()[0].target_group_arn(),
        Some(tg.as_str())
    );

    let volumes = volumes(moto, infra).await;
    let [(volume, size, kind, zone, tags)] = volumes.as_slice() else {
        return Err(format!("volumes {volumes:?}"));
    };
    assert_eq!(
        (*size, kind.as_str(), zone.as_str()),
        (10, "gp3", "us-east-1a")
    );
    let pv = tags
        .iter()
        .find(|(k, _)| k == "kubernetes.io/created-for/pv/name")
        .map(|(_, v)| v.clone())
        .unwrap();
    assert!(pv.starts_with("pvc-"), "{pv}");
    assert!(
        tag_is(tags, "Name", &format!("{infra}-dynamic-{pv}")),
        "{tags:?}"
    );

    let found = buckets(moto, infra).await;
    let [bucket] = found.as_slice() else {
        return Err(format!("buckets {found:?}"));
    };
    assert!(
        bucket.starts_with(&format!("{infra}-image-registry-us-east-1-")) && bucket.len() == 62,
        "{bucket}"
    );
    let tagging = moto
        .s3
        .get_bucket_tagging()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| format!("bucket tags: {e:?}"))?;
    assert!(tagging
        .tag_set()
        .iter()
        .any(|t| t.key() == format!("kubernetes.io/cluster/{infra}") && t.value() == "owned"));
    let objects = moto
        .s3
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    if objects.contents().is_empty() {
        return Err("no objects in the registry bucket yet".into());
    }

    let record_name = format!("*.apps.{name}.{}", place.domain);
    let record = record(moto, place.zone_id, &record_name).await;
    if record.as_deref() != Some(elb_dns.as_str()) {
        return Err(format!("{record_name}: {record:?}, want {elb_dns}"));
    }
    let default_group = security_group(moto, infra, &format!("{infra}-default-sg"))
        .await
        .and_then(|g| g.group_id().map(str::to_owned));
    Ok(Guest {
        elb: elb.clone(),
        elb_dns: elb_dns.clone(),
        elb_group: elb_group.group_id().unwrap().to_owned(),
        nlb_arn: nlb.clone(),
        target_group_arn: tg.clone(),
        volume: volume.clone(),
        bucket: bucket.clone(),
        record,
        default_group,
    })
}

/// Nothing of `infra`'s guest is left in moto.
async fn nothing_left(moto: &Moto, place: &Where<'_>, name: &str, infra: &str) {
    let elbs =
        classic_load_balancers(moto, place.vpc, infra, "openshift-ingress/router-default").await;
    assert!(elbs.is_empty(), "{elbs:?}");
    let groups = moto
        .ec2
        .describe_security_groups()
        .filters(filter("vpc-id", place.vpc))
        .filters(filter(
            &format!("tag:kubernetes.io/cluster/{infra}"),
            "owned",
        ))
        .send()
        .await
        .unwrap();
    let names: Vec<&str> = groups
        .security_groups()
        .iter()
        .filter_map(|g| g.group_name())
        .collect();
    assert!(names.is_empty(), "security groups left: {names:?}");
    let (nlbs, tgs) = network_load_balancers(moto, place.vpc, infra).await;
    assert!(nlbs.is_empty() && tgs.is_empty(), "{nlbs:?} {tgs:?}");
    assert!(volumes(moto, infra).await.is_empty());
    assert!(buckets(moto, infra).await.is_empty());
    let record_name = format!("*.apps.{name}.{}", place.domain);
    assert_eq!(record(moto, place.zone_id, &record_name).await, None);
}

/// Watches HostedCluster `name` until it is gone; the conditions it went through, as
/// `(type, status, reason, message)`, once each, in order of appearance.
async fn conditions_until_gone(
    watch: &mut Watch,
    name: &str,
) -> Vec<(String, String, String, String)> {
    let mut seen: Vec<(String, String, String, String)> = Vec::new();
    loop {
        let event = watch
            .next_within(Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("{name} was never deleted"));
        if event["object"]["metadata"]["name"] != name {
            continue;
        }
        if event["type"] == "DELETED" {
            return seen;
        }
        for c in event["object"]["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let entry = (
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            );
            if !seen.contains(&entry) {
                seen.push(entry);
            }
        }
    }
}

fn saw(
    seen: &[(String, String, String, String)],
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    seen.iter()
        .any(|(k, s, r, m)| k == kind && s == status && r == reason && m == message)
}

/// What `hypershift destroy infra` would do for the guest left behind: by tag and name.
async fn remove_left_behind(moto: &Moto, place: &Where<'_>, name: &str, guest: &Guest) {
    moto.elb
        .delete_load_balancer()
        .load_balancer_name(&guest.elb)
        .send()
        .await
        .unwrap();
    for listener in moto
        .elbv2
        .describe_listeners()
        .load_balancer_arn(&guest.nlb_arn)
        .send()
        .await
        .unwrap()
        .listeners()
    {
        moto.elbv2
            .delete_listener()
            .listener_arn(listener.listener_arn().unwrap())
            .send()
            .await
            .unwrap();
    }
    moto.elbv2
        .delete_load_balancer()
        .load_balancer_arn(&guest.nlb_arn)
        .send()
        .await
        .unwrap();
    moto.elbv2
        .delete_target_group()
        .target_group_arn(&guest.target_group_arn)
        .send()
        .await
        .unwrap();
    moto.ec2
        .delete_volume()
        .volume_id(&guest.volume)
        .send()
        .await
        .unwrap();
    let objects = moto
        .s3
        .list_objects_v2()
        .bucket(&guest.bucket)
        .send()
        .await
        .unwrap();
    for object in objects.contents() {
        moto.s3
            .delete_object()
            .bucket(&guest.bucket)
            .key(object.key().unwrap())
            .send()
            .await
            .unwrap();
    }
    moto.s3
        .delete_bucket()
        .bucket(&guest.bucket)
        .send()
        .await
        .unwrap();
    let record_name = format!("*.apps.{name}.{}", place.domain);
    let listed = moto
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(place.zone_id)
        .send()
        .await
        .unwrap();
    for set in listed.resource_record_sets() {
        if set.name().trim_end_matches('.').replace("\\052", "*") == record_name {
            moto.route53
                .change_resource_record_sets()
                .hosted_zone_id(place.zone_id)
                .change_batch(
                    ChangeBatch::builder()
                        .changes(
                            Change::builder()
                                .action(ChangeAction::Delete)
                                .resource_record_set(set.clone())
                                .build()
                                .unwrap(),
                        )
                        .build()
                        .unwrap(),
                )
                .send()
                .await
                .unwrap();
        }
    }
    for group in [Some(&guest.elb_group), guest.default_group.as_ref()]
        .into_iter()
        .flatten()
    {
        let described = moto
            .ec2
            .describe_security_groups()
            .group_ids(group)
            .send()
            .await
            .unwrap();
        let rules = described.security_groups()[0].ip_permissions().to_vec();
        if !rules.is_empty() {
            moto.ec2
                .revoke_security_group_ingress()
                .group_id(group)
                .set_ip_permissions(Some(rules))
                .send()
                .await
                .unwrap();
        }
        moto.ec2
            .delete_security_group()
            .group_id(group)
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_makes_its_cloud_resources_and_only_the_annotation_has_them_removed() {
    let Some(endpoint_url) = moto_endpoint() else {
        return;
    };
    let moto = moto(&endpoint_url).await;
    let u = unique();
    let ns = format!("gns{u}");
    let (kept, removed) = (format!("gk{u}"), format!("gr{u}"));
    let (kept_infra, removed_infra) = (format!("{kept}-x"), format!("{removed}-x"));
    let zones = ["us-east-1a", "us-east-1b"];

    // The guest VPC as `hypershift create infra aws` makes it: private subnets for the
    // nodes, public ones for the load balancers; the public zone of the base domain.
    let (vpc, private) = network(
        &moto,
        252,
        &zones,
        &[("Name", &format!("g{u}"))],
        &[("Name", &format!("g{u}-private"))],
    )
    .await;
    let mut public = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let subnet = moto
            .ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.252.{}.0/24", 101 + i))
            .availability_zone(*zone)
            .tag_specifications(tagged(
                ResourceType::Subnet,
                &[("Name", &format!("g{u}-public-{zone}"))],
            ))
            .send()
            .await
            .unwrap();
        public.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    public.sort();
    let domain = format!("g{u}.hcpflow.test");
    let zone = moto
        .route53
        .create_hosted_zone()
        .name(&domain)
        .caller_reference(format!("{domain}-{}", unique()))
        .send()
        .await
        .unwrap();
    let zone_id = zone
        .hosted_zone()
        .unwrap()
        .id()
        .trim_start_matches("/hostedzone/")
        .to_owned();
    let policy = CPO_POLICY.replace("${LOCAL_ZONE_ID}", &zone_id);
    let mut role_names = Vec::new();
    let mut roles = Vec::new();
    for infra in [&kept_infra, &removed_infra] {
        let role_name = format!("{infra}-control-plane-operator");
        roles.push(role(&moto, &role_name, &policy).await);
        role_names.push(role_name);
    }
    let place = Where {
        vpc: &vpc,
        public_subnets: &public,
        zone_id: &zone_id,
        domain: &domain,
    };

    let settings = Settings {
        endpoint: endpoint_url.clone(),
        region: REGION.into(),
        management_cluster: format!("mgmt-g{u}"),
        period: Duration::from_millis(200),
        guest_cleanup_timeout: Duration::from_secs(30),
    };
    let state = std::env::temp_dir().join(format!("hcpflow-guest-{u}.json"));
    let emu =
        emulator_installed_with(Install::with_cloud(settings.clone()), Some(state.clone())).await;
    let hcs = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/hostedclusters");
    let nps = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/nodepools");
    post(&emu, "/api/v1/namespaces", &namespace(&ns)).await;
    for ((name, infra), role) in [(&kept, &kept_infra), (&removed, &removed_infra)]
        .into_iter()
        .zip(&roles)
    {
        let mut hc = hosted_cluster_in(name, infra, "Public", &vpc, &private[0], role);
        hc["spec"]["dns"] = json!({"baseDomain": domain, "publicZoneID": zone_id});
        post_pull_secret(&emu, &ns, name).await;
        let (status, body) = post(&emu, &hcs, &hc).await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = post(&emu, &nps, &node_pool_in(name, name, &private[0])).await;
        assert_eq!(status, 201, "{body}");
    }
    for name in [&kept, &removed] {
        wait(&emu, &format!("{hcs}/{name}"), 30, |_, hc| {
            is(hc, "AWSDefaultSecurityGroupCreated", "True") && is(hc, "Available", "True")
        })
        .await;
    }

    // Each guest makes its resources once its NodePool has a node.
    let mut made = Vec::new();
    for (name, infra) in [(&kept, &kept_infra), (&removed, &removed_infra)] {
        let guest = eventually("the guest's cloud resources", 60, || {
            guest_resources(&moto, &place, name, infra)
        })
        .await;
        assert!(guest.default_group.is_some(), "{guest:?}");
        assert!(guest.record.is_some());
        made.push(guest);
    }

    // A restart of the emulator finds them again: nothing is made twice.
    emu.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let emu = emulator_installed_with(Install::with_cloud(settings), Some(state.clone())).await;
    for name in [&kept, &removed] {
        wait(&emu, &format!("{hcs}/{name}"), 30, |_, hc| {
            is(hc, "Available", "True")
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for ((name, infra), before) in [(&kept, &kept_infra), (&removed, &removed_infra)]
        .into_iter()
        .zip(&made)
    {
        let after = guest_resources(&moto, &place, name, infra)
            .await
            .unwrap_or_else(|e| panic!("after the restart: {e}"));
        assert_eq!(&after, before);
    }

    // Deleted as `hypershift destroy cluster` deletes it (annotated first): the control
    // plane removes the default security group and the guest removes its resources.
    let mut watch = Watch::open(&emu, &format!("{hcs}?watch=true")).await;
    let (status, body) = patch(
        &emu,
        &format!("{hcs}/{removed}"),
        "application/merge-patch+json",
        &json!({"metadata": {"annotations": {CLEANUP_CLOUD_RESOURCES: "true"}}}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    delete(&emu, &format!("{hcs}/{removed}")).await;
    let seen = conditions_until_gone(&mut watch, &removed).await;
    assert!(
        saw(
            &seen,
            "CloudResourcesDestroyed",
            "False",
            "RemainingCloudResources",
            "Remaining resources: image-registry,ingress-controllers,loadbalancers,persistent-volumes"
        ),
        "{seen:?}"
    );
    assert!(
        saw(
            &seen,
            "CloudResourcesDestroyed",
            "True",
            "CloudResourcesDestroyed",
            "All guest resources destroyed"
        ),
        "{seen:?}"
    );
    assert!(
        saw(
            &seen,
            "AWSDefaultSecurityGroupDeleted",
            "True",
            "AsExpected",
            "All is well"
        ),
        "{seen:?}"
    );
    nothing_left(&moto, &place, &removed, &removed_infra).await;
    assert!(security_group(
        &moto,
        &removed_infra,
        &format!("{removed_infra}-default-sg")
    )
    .await
    .is_none());

    // Deleted without it: the HostedCluster goes, everything in AWS stays.
    delete(&emu, &format!("{hcs}/{kept}")).await;
    let seen = conditions_until_gone(&mut watch, &kept).await;
    for kind in ["CloudResourcesDestroyed", "AWSDefaultSecurityGroupDeleted"] {
        assert!(
            saw(&seen, kind, "Unknown", "StatusUnknown", ""),
            "{kind}: {seen:?}"
        );
        assert!(
            !seen.iter().any(|(k, s, _, _)| k == kind && s != "Unknown"),
            "{kind}: {seen:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left = guest_resources(&moto, &place, &kept, &kept_infra)
        .await
        .unwrap_or_else(|e| panic!("the guest's resources should have been left: {e}"));
    assert_eq!(&left, &made[0]);
    assert!(left.default_group.is_some());
    emu.stop();

    // What the test made, and what the kept cluster left behind.
    remove_left_behind(&moto, &place, &kept, &left).await;
    nothing_left(&moto, &place, &kept, &kept_infra).await;
    let _ = std::fs::remove_file(&state);
    let _ = moto.route53.delete_hosted_zone().id(&zone_id).send().await;
    for role in &role_names {
        let _ = moto
            .iam
            .delete_role_policy()
            .role_name(role.as_str())
            .policy_name(format!("{role}-policy"))
            .send()
            .await;
        let _ = moto.iam.delete_role().role_name(role.as_str()).send().await;
    }
    for subnet in private.iter().chain(&public) {
        let _ = moto.ec2.delete_subnet().subnet_id(subnet).send().await;
    }
    let _ = moto.ec2.delete_vpc().vpc_id(&vpc).send().await;
}
