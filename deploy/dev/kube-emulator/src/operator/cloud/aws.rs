//! The AWS side of the emulator: clients with the management account's credentials
//! (moto takes `testing`/`testing`), the control plane's through its role in the
//! hosted cluster's account, and AWS errors as the Go SDK v2 the
//! operators are written with reports them — the operators put `err.Error()` or the
//! error code (`supportawsutil.AWSErrorCode`) into their conditions, so the emulator's
//! messages must be spelled the same way.

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::operation::RequestId;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::Settings;

/// The clients every simulated component uses (the CPO's permissions are checked
/// separately, before each call it would make: see `iam`).
#[derive(Debug, Clone)]
pub(super) struct Clients {
    /// The region they call.
    pub(super) region: String,
    pub(super) ec2: aws_sdk_ec2::Client,
    /// The classic ELB API (the guest's router load balancer).
    pub(super) elb: aws_sdk_elasticloadbalancing::Client,
    pub(super) elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub(super) iam: aws_sdk_iam::Client,
    pub(super) route53: aws_sdk_route53::Client,
    /// Path-style, as an endpoint override needs it (the guest's registry bucket).
    pub(super) s3: aws_sdk_s3::Client,
    sdk: aws_config::SdkConfig,
}

impl Clients {
    pub(super) async fn connect(settings: &Settings) -> Self {
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .endpoint_url(&settings.endpoint)
            .credentials_provider(aws_credential_types::Credentials::new(
                "testing",
                "testing",
                None,
                None,
                "hcpflow-kube-emulator",
            ))
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(Duration::from_secs(20))
                    .operation_attempt_timeout(Duration::from_secs(10))
                    .build(),
            )
            .load()
            .await;
        Self::from_sdk(settings.region.clone(), sdk)
    }

    /// The same endpoint and region, acting as `role_arn`: what a control-plane
    /// component does in the hosted cluster's account, whichever account that is (moto
    /// gives credentials of the role's account, whether or not the role exists). The
    /// real control-plane-operator assumes its role with a web identity token; moto
    /// treats that call as this one.
    pub(super) async fn assuming(&self, role_arn: &str) -> Self {
        let role = aws_config::sts::AssumeRoleProvider::builder(role_arn)
            .session_name("hcpflow-kube-emulator")
            .configure(&self.sdk)
            .build()
            .await;
        let sdk = self
            .sdk
            .to_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(role),
            )
            .build();
        Self::from_sdk(self.region.clone(), sdk)
    }

    fn from_sdk(region: String, sdk: aws_config::SdkConfig) -> Self {
        let s3 = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build();
        Self {
            region,
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

/// The Go SDK's service ids, as its error strings name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Service {
    Ec2,
    Elb,
    Elbv2,
    Route53,
    Iam,
    S3,
}

impl Service {
    fn sdk_id(self) -> &'static str {
        match self {
            Self::Ec2 => "EC2",
            Self::Elb => "Elastic Load Balancing",
            Self::Elbv2 => "Elastic Load Balancing v2",
            Self::Route53 => "Route 53",
            Self::Iam => "IAM",
            Self::S3 => "S3",
        }
    }

    /// The IAM action prefix.
    pub(super) fn prefix(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::Elb | Self::Elbv2 => "elasticloadbalancing",
            Self::Route53 => "route53",
            Self::Iam => "iam",
            Self::S3 => "s3",
        }
    }
}

/// One failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AwsError {
    pub(super) service: Service,
    pub(super) operation: &'static str,
    /// AWS's error code; `Unknown` when no answer came (what `AWSErrorCode` returns for
    /// an error that is not an API error).
    pub(super) code: String,
    pub(super) message: String,
    /// The HTTP status and request id of the answer, when there was one.
    pub(super) answer: Option<(u16, String)>,
    /// A failure before the call: the credentials could not be had (the Go SDK's
    /// `get identity: get credentials: ...`).
    pub(super) identity: bool,
}

impl AwsError {
    /// A refusal as AWS answers it.
    pub(super) fn api(
        service: Service,
        operation: &'static str,
        status: u16,
        request_id: String,
        code: &str,
        message: String,
    ) -> Self {
        Self {
            service,
            operation,
            code: code.to_owned(),
            message,
            answer: Some((status, request_id)),
            identity: false,
        }
    }

    /// `supportawsutil.AWSErrorCode(err)`.
    pub(super) fn code(&self) -> &str {
        &self.code
    }

    pub(super) fn is_not_found(&self) -> bool {
        self.code.ends_with("NotFound") || self.code.starts_with("NoSuch")
    }

    /// `err.Error()` of the Go SDK v2: `operation error EC2: CreateSecurityGroup, https
    /// response error StatusCode: 403, RequestID: …, api error UnauthorizedOperation: …`.
    pub(super) fn go_error(&self) -> String {
        let head = format!(
            "operation error {}: {}",
            self.service.sdk_id(),
            self.operation
        );
        if self.identity {
            return format!(
                "{head}, get identity: get credentials: failed to refresh cached credentials, {}: {}",
                self.code, self.message
            );
        }
        match &self.answer {
            Some((status, request_id)) => format!(
                "{head}, https response error StatusCode: {status}, RequestID: {request_id}, api error {}: {}",
                self.code, self.message
            ),
            None => format!("{head}, {}", self.message),
        }
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.go_error())
    }
}

/// The [`AwsError`] of a failed SDK call.
pub(super) fn sdk<E>(
    service: Service,
    operation: &'static str,
    error: SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error,
{
    let unknown = |message: String| AwsError {
        service,
        operation,
        code: "Unknown".into(),
        message,
        answer: None,
        identity: false,
    };
    match &error {
        SdkError::ServiceError(failure) => {
            let status = failure.raw().status().as_u16();
            let inner = failure.err();
            let request_id = inner
                .meta()
                .request_id()
                .or_else(|| error.request_id())
                .unwrap_or_default()
                .to_owned();
            match inner.code() {
                Some(code) => AwsError::api(
                    service,
                    operation,
                    status,
                    request_id,
                    code,
                    inner.message().unwrap_or_default().to_owned(),
                ),
                None => unknown(format!(
                    "https response error StatusCode: {status}, RequestID: {request_id}, {inner}"
                )),
            }
        }
        SdkError::TimeoutError(_) => unknown("request timeout".into()),
        SdkError::DispatchFailure(failure) => unknown(format!("{failure:?}")),
        _ => unknown(format!("{error:?}")),
    }
}

/// `Ok(None)` for a not-found answer.
pub(super) fn unless_not_found<T>(result: Result<T, AwsError>) -> Result<Option<T>, AwsError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A request the SDK would not build (a missing required field): the Go SDK reports
/// such a failure without an answer, as an `Unknown` code.
pub(super) fn unbuilt(
    service: Service,
    operation: &'static str,
    error: impl std::fmt::Display,
) -> AwsError {
    AwsError {
        service,
        operation,
        code: "Unknown".into(),
        message: error.to_string(),
        answer: None,
        identity: false,
    }
}
