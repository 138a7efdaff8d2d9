//! The control-plane-operator's identity and the NodePools' wait for the default
//! security group, against the dev stack's moto (`HCPFLOW_DEV_MOTO_ENDPOINT`; skipped
//! without it, a failure under `make test`): Public HostedClusters whose issuer is an
//! S3 bucket in moto. `ValidAWSIdentityProvider` stays False (`InvalidIdentityProvider`
//! `WebIdentityErr`) while STS could not verify the CPO's token — no OIDC provider, no
//! JWKS, a role that does not trust the provider — and the CPO then makes no default
//! security group, so the NodePools get no machines (`AWSSecurityGroupAvailable` False
//! `DefaultSGNotReady`) though the HostedCluster is Available; published, it turns True
//! and the NodePools get their nodes. A role that may not make the security group, or
//! may not run the health check, keeps its NodePool waiting too. Every name is this
//! run's own; what the test made it removes.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use hcpflow_kube_emulator::operator::cloud::{Settings, CLEANUP_CLOUD_RESOURCES};
use hcpflow_kube_emulator::server::Install;
use serde_json::{json, Value};

use crate::cloud::*;
use crate::support::*;

/// A role at path `/hcpflow/` trusting `provider` for web identities, with `document` as
/// its inline policy; its ARN.
async fn trusting_role(moto: &Moto, name: &str, provider: &str, document: &str) -> String {
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Federated": provider},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {"x:aud": "openshift"}}}]});
    let created = moto
        .iam
        .create_role()
        .role_name(name)
        .path("/hcpflow/")
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .unwrap();
    put_policy(moto, name, document).await;
    created.role().unwrap().arn().to_owned()
}

/// The CPO policy without `action`.
fn without(policy: &str, action: &str) -> String {
    let mut document: Value = serde_json::from_str(policy).unwrap();
    for statement in document["Statement"].as_array_mut().unwrap() {
        if let Some(actions) = statement["Action"].as_array_mut() {
            actions.retain(|a| a != action);
        }
    }
    document.to_string()
}

async fn put_object(moto: &Moto, bucket: &str, key: &str, body: &Value) {
    moto.s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_string().into_bytes()))
        .send()
        .await
        .unwrap();
}

fn pool_waits(pool: &Value) -> Result<(), String> {
    let group = condition(pool, "AWSSecurityGroupAvailable").ok_or("no condition yet")?;
    let expected = (
        &json!("False"),
        &json!("DefaultSGNotReady"),
        &json!("Waiting for AWS default security group to be created for hosted cluster"),
    );
    if (&group["status"], &group["reason"], &group["message"]) != expected {
        return Err(format!("AWSSecurityGroupAvailable: {group}"));
    }
    if pool["status"]["replicas"] != 0 || is(pool, "Ready", "True") {
        return Err(format!("it has machines: {pool}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pools_wait_for_the_security_group_which_waits_for_a_valid_identity_provider() {
    let Some(endpoint_url) = moto_endpoint() else {
        return;
    };
    let moto = moto(&endpoint_url).await;
    let u = unique();
    let ns = format!("id{u}");
    let bucket = format!("oidc-id{u}");
    moto.s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let (vpc, subnets) = network(
        &moto,
        9,
        &["us-east-1a"],
        &[("Name", &ns)],
        &[("Name", &ns)],
    )
    .await;
    let policy = CPO_POLICY.replace("${LOCAL_ZONE_ID}", "Z0000000000000000000");

    // Four clusters, each with its own issuer in the bucket and its own CPO role: `ok`
    // whose role trusts its provider, `untrusted` whose role trusts another one,
    // `no-sg` whose role may not create security groups, `no-check` whose role may not
    // describe VPC endpoints (the health check's call).
    let cases = ["ok", "untrusted", "no-sg", "no-check"];
    let mut issuers = Vec::new();
    let mut providers = Vec::new();
    let mut roles = Vec::new();
    let emu = emulator_installed(Install::with_cloud(Settings {
        endpoint: endpoint_url.clone(),
        region: REGION.into(),
        management_cluster: format!("mgmt-{u}"),
        period: Duration::from_millis(200),
        guest_cleanup_timeout: Duration::from_secs(20),
    }))
    .await;
    let hcs = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/hostedclusters");
    let nps = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/nodepools");
    post(&emu, "/api/v1/namespaces", &namespace(&ns)).await;
    for case in cases {
        let name = format!("{case}{u}");
        let infra = format!("{name}-x");
        let issuer = format!("https://{bucket}.s3.{REGION}.amazonaws.com/{infra}");
        let provider = format!(
            "arn:aws:iam::{ACCOUNT}:oidc-provider/{bucket}.s3.{REGION}.amazonaws.com/{infra}"
        );
        let trusted = if case == "untrusted" {
            format!("arn:aws:iam::{ACCOUNT}:oidc-provider/elsewhere.example.com")
        } else {
            provider.clone()
        };
        let document = match case {
            "no-sg" => without(&policy, "ec2:CreateSecurityGroup"),
            "no-check" => without(&policy, "ec2:DescribeVpcEndpoints"),
            _ => policy.clone(),
        };
        let role_name = format!("{infra}-control-plane-operator");
        let role = trusting_role(&moto, &role_name, &trusted, &document).await;
        let mut hc = hosted_cluster_in(&name, &infra, "Public", &vpc, &subnets[0], &role);
        hc["spec"]["issuerURL"] = json!(issuer);
        hc["metadata"]["annotations"] = json!({CLEANUP_CLOUD_RESOURCES: "true"});
        post_pull_secret(&emu, &ns, &name).await;
        let (status, body) = post(&emu, &hcs, &hc).await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = post(&emu, &nps, &node_pool_in(&name, &name, &subnets[0])).await;
        assert_eq!(status, 201, "{body}");
        issuers.push((name, infra, issuer));
        providers.push(provider);
        roles.push(role_name);
    }
    let path = |i: usize| format!("{hcs}/{}", issuers[i].0);
    let pool = |i: usize| format!("{nps}/{}", issuers[i].0);

    // Nothing published: STS cannot verify any token. Available all the same, but no
    // default security group, so no machines.
    for (i, case) in cases.iter().enumerate() {
        let invalid = wait(&emu, &path(i), 30, |_, hc| {
            is(hc, "Available", "True") && is(hc, "ValidAWSIdentityProvider", "False")
        })
        .await;
        let identity = condition(&invalid, "ValidAWSIdentityProvider").unwrap();
        assert_eq!(
            (&identity["reason"], &identity["message"]),
            (&json!("InvalidIdentityProvider"), &json!("WebIdentityErr")),
            "{case}"
        );
        assert!(
            condition(&invalid, "AWSDefaultSecurityGroupCreated").is_none(),
            "{invalid}"
        );
        eventually("the pool waits", 10, || async {
            pool_waits(&get(&emu, &pool(i)).await.1)
        })
        .await;
    }

    // The OIDC providers, then the discovery documents: still no JWKS to verify with.
    for (i, (_, _, issuer)) in issuers.iter().enumerate() {
        let created = moto
            .iam
            .create_open_id_connect_provider()
            .url(issuer)
            .client_id_list("openshift")
            .thumbprint_list("a".repeat(40))
            .send()
            .await
            .unwrap();
        assert_eq!(
            created.open_id_connect_provider_arn(),
            Some(providers[i].as_str())
        );
    }
    for (_, infra, issuer) in &issuers {
        let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/openid/v1/jwks"),
                               "response_types_supported": ["id_token"],
                               "subject_types_supported": ["public"],
                               "id_token_signing_alg_values_supported": ["RS256"]});
        put_object(
            &moto,
            &bucket,
            &format!("{infra}/.well-known/openid-configuration"),
            &discovery,
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..cases.len() {
        let (_, hc) = get(&emu, &path(i)).await;
        assert!(is(&hc, "ValidAWSIdentityProvider", "False"), "{hc}");
        pool_waits(&get(&emu, &pool(i)).await.1).unwrap();
    }

    // The JWKS: the tokens verify. `ok` gets its security group and its node.
    for (_, infra, _) in &issuers {
        put_object(
            &moto,
            &bucket,
            &format!("{infra}/openid/v1/jwks"),
            &json!({"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k",
                              "n": "AQAB", "e": "AQAB"}]}),
        )
        .await;
    }
    let ok = wait(&emu, &path(0), 30, |_, hc| {
        is(hc, "ValidAWSIdentityProvider", "True")
            && is(hc, "AWSDefaultSecurityGroupCreated", "True")
    })
    .await;
    let identity = condition(&ok, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (&identity["reason"], &identity["message"]),
        (&json!("AsExpected"), &json!("All is well"))
    );
    let group_id = ok["status"]["platform"]["aws"]["defaultWorkerSecurityGroupID"]
        .as_str()
        .unwrap()
        .to_owned();
    let (ok_name, ok_infra, _) = &issuers[0];
    let made = security_group(&moto, ok_infra, &format!("{ok_infra}-default-sg"))
        .await
        .unwrap();
    assert_eq!(made.group_id(), Some(group_id.as_str()));
    let ready = wait(&emu, &pool(0), 20, |_, np| {
        np["status"]["replicas"] == 1 && is(np, "Ready", "True")
    })
    .await;
    let available = condition(&ready, "AWSSecurityGroupAvailable").unwrap();
    assert_eq!(
        (
            &available["status"],
            &available["reason"],
            &available["message"]
        ),
        (
            &json!("True"),
            &json!("AsExpected"),
            &json!("NodePool has a default security group")
        ),
        "{ok_name}"
    );

    // `untrusted`: its role does not trust its provider.
    let (_, untrusted) = get(&emu, &path(1)).await;
    assert!(
        is(&untrusted, "ValidAWSIdentityProvider", "False"),
        "{untrusted}"
    );
    pool_waits(&get(&emu, &pool(1)).await.1).unwrap();

    // `no-sg`: a valid identity, but the group cannot be made; its pool keeps waiting.
    let refused = wait(&emu, &path(2), 30, |_, hc| {
        is(hc, "ValidAWSIdentityProvider", "True")
            && is(hc, "AWSDefaultSecurityGroupCreated", "False")
    })
    .await;
    assert_eq!(
        condition(&refused, "AWSDefaultSecurityGroupCreated").unwrap()["message"],
        "failed to create security group, code: UnauthorizedOperation"
    );
    pool_waits(&get(&emu, &pool(2)).await.1).unwrap();

    // `no-check`: the health check's own call is refused: Unknown, with the code.
    let unknown = wait(&emu, &path(3), 30, |_, hc| {
        is(hc, "ValidAWSIdentityProvider", "Unknown")
    })
    .await;
    let identity = condition(&unknown, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (&identity["reason"], &identity["message"]),
        (&json!("AWSError"), &json!("UnauthorizedOperation"))
    );
    assert!(condition(&unknown, "AWSDefaultSecurityGroupCreated").is_none());
    pool_waits(&get(&emu, &pool(3)).await.1).unwrap();

    // Fixed, `untrusted` heals: the group, then the node.
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Federated": providers[1]},
        "Action": "sts:AssumeRoleWithWebIdentity"}]});
    moto.iam
        .update_assume_role_policy()
        .role_name(&roles[1])
        .policy_document(trust.to_string())
        .send()
        .await
        .unwrap();
    wait(&emu, &pool(1), 30, |_, np| {
        np["status"]["replicas"] == 1 && is(np, "AWSSecurityGroupAvailable", "True")
    })
    .await;

    // Deleted (the guests' resources and default groups with them), then what the test
    // made for itself.
    for i in 0..cases.len() {
        delete(&emu, &pool(i)).await;
    }
    for i in 0..cases.len() {
        delete(&emu, &path(i)).await;
    }
    for i in 0..cases.len() {
        wait(&emu, &path(i), 90, |status, _| status == 404).await;
    }
    for (_, infra, _) in &issuers {
        assert!(
            security_group(&moto, infra, &format!("{infra}-default-sg"))
                .await
                .is_none(),
            "{infra}"
        );
    }
    emu.stop();
    for provider in &providers {
        let _ = moto
            .iam
            .delete_open_id_connect_provider()
            .open_id_connect_provider_arn(provider)
            .send()
            .await;
    }
    for role in &roles {
        let _ = moto
            .iam
            .delete_role_policy()
            .role_name(role)
            .policy_name(format!("{role}-policy"))
            .send()
            .await;
        let _ = moto.iam.delete_role().role_name(role).send().await;
    }
    let listed = moto
        .s3
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    for object in listed.contents() {
        let _ = moto
            .s3
            .delete_object()
            .bucket(&bucket)
            .set_key(object.key().map(str::to_owned))
            .send()
            .await;
    }
    let _ = moto.s3.delete_bucket().bucket(&bucket).send().await;
    for subnet in &subnets {
        let _ = moto.ec2.delete_subnet().subnet_id(subnet).send().await;
    }
    let _ = moto.ec2.delete_vpc().vpc_id(&vpc).send().await;
}
