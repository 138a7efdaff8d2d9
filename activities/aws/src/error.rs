//! AWS errors, classified once: what the retry policy may try again and what it must
//! not (STYLE.md: errors carry the retry decision). Every failure keeps AWS's error code
//! as its kind and AWS's message.

use hcpflow_engine::ActivityFailure;

/// Codes that mean "try again later": throttling, a dependency still going away, AWS
/// being briefly unavailable, and not-found right after a create (eventual consistency).
const RETRYABLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "PriorRequestNotComplete",
    "DependencyViolation",
    "DeleteConflict",
    "ResourceInUse",
    "HostedZoneNotEmpty",
    "ExistingVpcEndpointConnections",
    "IncorrectState",
    "InvalidState",
    "ConcurrentModification",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
    "IdempotentParameterMismatch",
];

/// Codes that are "not found" and, right after a create that returned the id, only mean
/// AWS has not caught up yet.
const NOT_FOUND_SUFFIXES: &[&str] = &[".NotFound", "NotFound"];
/// ... and the `NoSuch*` codes of IAM, S3 and Route53 (`NoSuchEntity`, `NoSuchHostedZone`).
const NOT_FOUND_PREFIX: &str = "NoSuch";

/// How a call failed, before the activity decides what that means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    /// AWS's error code (`DependencyViolation`, `InvalidVpcID.NotFound`, ...), or a kind
    /// of our own for failures without one (`Transport`, `Timeout`, `Http500`).
    pub code: String,
    pub message: String,
    /// The HTTP status, when a response came back.
    pub status: Option<u16>,
}

impl AwsError {
    pub fn new(code: impl Into<String>, message: impl Into<String>, status: Option<u16>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            status,
        }
    }

    /// A "does not exist" answer: success for a delete, and after a create, a lag.
    pub fn is_not_found(&self) -> bool {
        self.status == Some(404)
            || NOT_FOUND_SUFFIXES
                .iter()
                .any(|suffix| self.code.ends_with(suffix))
            || self.code.starts_with(NOT_FOUND_PREFIX)
    }

    /// Whether trying again later can succeed.
    pub fn is_retryable(&self) -> bool {
        RETRYABLE_CODES.contains(&self.code.as_str())
            || matches!(self.code.as_str(), "Transport" | "Timeout")
            || self
                .status
                .is_some_and(|status| status == 429 || status >= 500)
    }

    /// The failure as the engine records it. `not_found_retryable` is for the calls
    /// right after a create, where AWS may not see the new resource yet.
    pub fn into_failure(self, not_found_retryable: bool) -> ActivityFailure {
        let retryable = self.is_retryable() || (not_found_retryable && self.is_not_found());
        let message = if self.message.is_empty() {
            format!("AWS answered {}", self.code)
        } else {
            self.message
        };
        if retryable {
            ActivityFailure::retryable(self.code, message)
        } else {
            ActivityFailure::permanent(self.code, message)
        }
    }
}

impl From<AwsError> for ActivityFailure {
    fn from(error: AwsError) -> Self {
        error.into_failure(false)
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Turns an SDK error of any service into an [`AwsError`].
pub fn from_sdk<E, R>(error: aws_smithy_runtime_api::client::result::SdkError<E, R>) -> AwsError
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    R: std::fmt::Debug + HttpStatus,
{
    use aws_smithy_runtime_api::client::result::SdkError;
    match &error {
        SdkError::ServiceError(service) => {
            let status = Some(service.raw().status());
            let inner = service.err();
            match inner.code() {
                Some(code) => AwsError::new(code, inner.message().unwrap_or_default(), status),
                None => AwsError::new(
                    format!("Http{}", service.raw().status()),
                    inner.to_string(),
                    status,
                ),
            }
        }
        SdkError::TimeoutError(_) => AwsError::new("Timeout", format!("{error:?}"), None),
        SdkError::DispatchFailure(_) => AwsError::new("Transport", format!("{error:?}"), None),
        SdkError::ResponseError(response) => {
            let status = response.raw().status();
            AwsError::new(
                format!("Http{status}"),
                "the response could not be read",
                Some(status),
            )
        }
        _ => AwsError::new("Sdk", format!("{error:?}"), None),
    }
}

/// An item EC2 reports as unsuccessful inside a successful answer (the batch deletes).
pub fn from_unsuccessful(error: &aws_sdk_ec2::types::UnsuccessfulItemError) -> AwsError {
    AwsError::new(
        error.code().unwrap_or("Unknown"),
        error.message().unwrap_or_default(),
        None,
    )
}

/// The HTTP status of a raw response, whatever its type.
pub trait HttpStatus {
    fn status(&self) -> u16;
}

impl HttpStatus for aws_smithy_runtime_api::http::Response {
    fn status(&self) -> u16 {
        self.status().as_u16()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: &str, status: u16) -> AwsError {
        AwsError::new(code, "message from AWS", Some(status))
    }

    #[test]
    fn throttling_dependencies_and_server_errors_are_retryable() {
        for code in [
            "Throttling",
            "RequestLimitExceeded",
            "DependencyViolation",
            "DeleteConflict",
        ] {
            let failure = error(code, 400).into_failure(false);
            assert!(failure.retryable, "{code}");
            assert_eq!(failure.kind, code);
            assert_eq!(failure.message, "message from AWS");
        }
        assert!(error("Http503", 503).into_failure(false).retryable);
        assert!(error("Whatever", 429).into_failure(false).retryable);
        assert!(
            AwsError::new("Transport", "connection refused", None)
                .into_failure(false)
                .retryable
        );
    }

    #[test]
    fn validation_and_permission_errors_are_permanent_and_keep_the_code() {
        for code in [
            "InvalidParameterValue",
            "UnauthorizedOperation",
            "AccessDenied",
            "MalformedPolicyDocument",
            "InvalidSubnet.Conflict",
        ] {
            let failure = error(code, 400).into_failure(false);
            assert!(!failure.retryable, "{code}");
            assert_eq!(failure.kind, code);
        }
    }

    #[test]
    fn not_found_is_retryable_only_right_after_a_create() {
        let missing = error("InvalidVpcID.NotFound", 400);
        assert!(missing.is_not_found());
        assert!(!missing.clone().into_failure(false).retryable);
        assert!(missing.into_failure(true).retryable);
        assert!(error("NoSuchEntity", 404).is_not_found());
        assert!(!error("InvalidParameterValue", 400).is_not_found());
    }
}
