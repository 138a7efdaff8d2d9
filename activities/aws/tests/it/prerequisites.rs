//! The prerequisites of a create, against moto: a cluster in another region than the
//! activities call is refused before anything is made, as is a missing OIDC bucket.

use hcpflow_aws::prerequisites::{check_prerequisites, CheckPrerequisites};

use crate::support::{stack, unique};

#[tokio::test]
async fn a_cluster_in_another_region_or_without_its_bucket_is_refused_first() {
    let Some(stack) =
        stack("a_cluster_in_another_region_or_without_its_bucket_is_refused_first").await
    else {
        return;
    };
    let bucket = unique("prereq-").to_lowercase();
    stack
        .moto
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let request = |region: &str, bucket: &str| CheckPrerequisites {
        oidc_bucket: bucket.to_owned(),
        management_vpc_id: None,
        management_subnet_ids: Vec::new(),
        region: Some(region.to_owned()),
    };
    let here = stack.aws.region.clone();
    let found = check_prerequisites(&stack.aws, &request(&here, &bucket))
        .await
        .unwrap();
    assert_eq!(found.oidc_bucket_region, here);

    let elsewhere = check_prerequisites(&stack.aws, &request("eu-west-1", &bucket))
        .await
        .unwrap_err();
    assert!(!elsewhere.retryable);
    assert_eq!(elsewhere.kind, "RegionMismatch");
    assert!(
        elsewhere.message.contains("eu-west-1") && elsewhere.message.contains(&here),
        "{}",
        elsewhere.message
    );

    let missing = check_prerequisites(&stack.aws, &request(&here, &format!("{bucket}-none")))
        .await
        .unwrap_err();
    assert!(!missing.retryable, "{missing:?}");

    stack
        .moto
        .s3
        .delete_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
}
