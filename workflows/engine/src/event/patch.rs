//! A versioning marker recorded by `ctx.patched(id)`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchMarked {
    pub patch_id: String,
}
