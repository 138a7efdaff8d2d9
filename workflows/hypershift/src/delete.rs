//! The compensation of a create: delete what it made.

use serde::{Deserialize, Serialize};

/// The compensation of the create that returned `T`: delete what it made. Serialized
/// as `T` itself, so a create's recorded result is its compensation's request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Delete<T>(pub T);
