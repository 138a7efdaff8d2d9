//! Kubernetes errors, classified once: what the retry policy may try again and what it
//! must not. Every failure keeps the API's `reason` (or a kind of our own) and message.

use hcpflow_engine::ActivityFailure;

/// The status code of an API error answer, if `error` is one.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

pub fn is_already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
}

/// The failure as the engine records it; `doing` says what was attempted
/// (`applying Secret clusters/demo-pull-secret`).
///
/// Retryable: a write conflict (stale resourceVersion, or an apply conflict with
/// another manager that may let go), throttling, the server's own errors, transport
/// failures. Permanent: invalid objects, missing permissions, not found, anything else
/// the server refused outright.
pub fn failure(doing: &str, error: kube::Error) -> ActivityFailure {
    match error {
        kube::Error::Api(status) => {
            let kind = if status.reason.is_empty() {
                format!("Http{}", status.code)
            } else {
                status.reason.clone()
            };
            let message = format!("{doing}: {} ({})", status.message, status.code);
            let retryable = (status.code == 409 && status.reason != "AlreadyExists")
                || status.code == 429
                || status.code >= 500;
            if retryable {
                ActivityFailure::retryable(kind, message)
            } else {
                ActivityFailure::permanent(kind, message)
            }
        }
        kube::Error::SerdeError(e) => ActivityFailure::permanent(
            "Decoding",
            format!("{doing}: the answer did not decode: {e}"),
        ),
        kube::Error::BuildRequest(e) => {
            ActivityFailure::permanent("BuildRequest", format!("{doing}: {e}"))
        }
        other => ActivityFailure::retryable("Transport", format!("{doing}: {other}")),
    }
}
