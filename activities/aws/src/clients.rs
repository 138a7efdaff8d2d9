//! The AWS clients: region and credentials from the standard AWS chain (environment,
//! profile, instance metadata), an optional endpoint override (the dev stack's moto), and
//! no retries inside the SDK — the engine retries, with backoff, visibly in the history.

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::SharedCredentialsProvider;

/// Where and how to reach AWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    pub region: String,
    /// One endpoint for every service (`HCPFLOW_AWS_ENDPOINT`), for moto or a proxy;
    /// `None` for real AWS.
    pub endpoint: Option<String>,
    /// `(access key id, secret)` instead of the standard credential chain. Tests sign
    /// with an access key id of their own, by which the dev stack's fault proxy tells
    /// their requests apart.
    pub static_credentials: Option<(String, String)>,
}

/// One client per service, sharing region, credentials and endpoint.
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub region: String,
    /// The account, by its configured name; `None`: the server's own.
    pub account: Option<String>,
    pub ec2: aws_sdk_ec2::Client,
    /// Classic load balancers: what a guest's LoadBalancer Services get by default.
    pub elb: aws_sdk_elasticloadbalancing::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub iam: aws_sdk_iam::Client,
    pub route53: aws_sdk_route53::Client,
    pub s3: aws_sdk_s3::Client,
    /// The loaded configuration: clients for another region (a Secrets Manager ARN's)
    /// are built from it.
    pub sdk: aws_config::SdkConfig,
}

impl AwsClients {
    pub async fn connect(settings: &AwsSettings) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .retry_config(RetryConfig::disabled());
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some((key, secret)) = &settings.static_credentials {
            loader = loader.credentials_provider(aws_credential_types::Credentials::new(
                key,
                secret,
                None,
                None,
                "hcpflow-static",
            ));
        }
        let sdk = loader.load().await;
        Self::from_sdk(sdk)
    }

    /// The same credentials and endpoint, calling `region`: where a create's target
    /// says its calls go.
    pub fn in_region(&self, region: &str) -> Self {
        Self {
            account: self.account.clone(),
            ..Self::from_sdk(
                self.sdk
                    .to_builder()
                    .region(Region::new(region.to_owned()))
                    .build(),
            )
        }
    }

    /// Clients in another account: credentials of `role_arn`, assumed with these
    /// clients' own (through the same endpoint; STS of `sts_region`, by default these
    /// clients' region), calling `region`. The SDK's identity
    /// cache keeps the assumed credentials and asks STS again before they expire.
    pub async fn assuming(
        &self,
        role_arn: &str,
        external_id: Option<&str>,
        sts_region: Option<&str>,
        session_name: &str,
        region: &str,
    ) -> Self {
        let mut role = aws_config::sts::AssumeRoleProvider::builder(role_arn)
            .session_name(session_name)
            .configure(&self.sdk);
        if let Some(external_id) = external_id {
            role = role.external_id(external_id);
        }
        if let Some(sts_region) = sts_region {
            role = role.region(Region::new(sts_region.to_owned()));
        }
        let credentials = SharedCredentialsProvider::new(role.build().await);
        Self::from_sdk(
            self.sdk
                .to_builder()
                .credentials_provider(credentials)
                .region(Region::new(region.to_owned()))
                .build(),
        )
    }

    fn from_sdk(sdk: aws_config::SdkConfig) -> Self {
        // Path-style S3 addressing: bucket names in the host only work with real DNS,
        // and moto (or any endpoint override) needs the bucket in the path.
        let s3 = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(sdk.endpoint_url().is_some())
            .build();
        Self {
            region: sdk.region().map(ToString::to_string).unwrap_or_default(),
            account: None,
            ec2: aws_sdk_ec2::Client::new(&sdk),
            elb: aws_sdk_elasticloadbalancing::Client::new(&sdk),
            elbv2: aws_sdk_elasticloadbalancingv2::Client::new(&sdk),
            iam: aws_sdk_iam::Client::new(&sdk),
            route53: aws_sdk_route53::Client::new(&sdk),
            s3: aws_sdk_s3::Client::from_conf(s3),
            sdk,
        }
    }
}
