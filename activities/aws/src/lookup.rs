//! The create pattern every activity shares: find what an earlier attempt made (by
//! its idempotency tag), else create it; note the resource in the ledger either way.

use std::future::Future;

use hcpflow_engine::ActivityFailure;

use crate::scope::Scope;

/// Returns the id `find` reports, or the one `create` makes, and notes it as created by
/// this activity (an earlier attempt's outcome was never recorded, so its resource is
/// this attempt's to report).
pub async fn find_or_create<Find, FindFut, Create, CreateFut>(
    scope: &Scope<'_>,
    kind: &str,
    find: Find,
    create: Create,
) -> Result<String, ActivityFailure>
where
    Find: FnOnce() -> FindFut,
    FindFut: Future<Output = Result<Option<String>, ActivityFailure>>,
    Create: FnOnce() -> CreateFut,
    CreateFut: Future<Output = Result<String, ActivityFailure>>,
{
    let id = match find().await? {
        Some(id) => id,
        None => create().await?,
    };
    scope.log.created(scope.resource(kind, &id));
    Ok(id)
}

/// The id a create call returned, or a retryable failure when it returned none.
pub fn created_id(id: Option<&str>, call: &str) -> Result<String, ActivityFailure> {
    id.map(str::to_owned)
        .ok_or_else(|| ActivityFailure::retryable("MissingId", format!("{call} returned no id")))
}

type SdkResult<T, E> = Result<
    T,
    aws_smithy_runtime_api::client::result::SdkError<E, aws_smithy_runtime_api::http::Response>,
>;

/// A call's answer, or `None` when AWS says the thing does not exist.
pub fn unless_not_found<T, E>(result: SdkResult<T, E>) -> Result<Option<T>, ActivityFailure>
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
{
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(error) => {
            let error = crate::error::from_sdk(error);
            if error.is_not_found() {
                Ok(None)
            } else {
                Err(error.into())
            }
        }
    }
}

/// A delete's outcome: done when it deleted (noted in the ledger) or found nothing.
pub fn deleted<T, E>(
    scope: &Scope<'_>,
    kind: &str,
    id: &str,
    result: SdkResult<T, E>,
) -> Result<(), ActivityFailure>
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
{
    if unless_not_found(result)?.is_some() {
        scope.log.deleted(scope.resource(kind, id));
    }
    Ok(())
}
