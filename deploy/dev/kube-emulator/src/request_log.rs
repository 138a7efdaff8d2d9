//! Who asked for what, as an API server's audit log records it: each resource request's
//! user, verb, API group, resource (with its subresource), namespace and name. A test
//! diffs what a client called against the RBAC rules that client is given
//! (`GET /_emulator/requests?user=U`).
//!
//! A request that creates its object by apply or update is also recorded as `create`:
//! the API server authorises it for both verbs.
//!
//! Users are authenticated as a static token file would: a bearer token names its
//! user (`Authorization: Bearer <user>`); a request without one is
//! `system:anonymous`.

use std::collections::VecDeque;
use std::sync::Mutex;

use http::Method;
use serde::Serialize;

/// Entries kept: the oldest go first beyond this.
const KEPT: usize = 200_000;

/// One resource request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub user: String,
    pub verb: &'static str,
    /// `""` for the core group.
    pub group: String,
    /// The plural, with `/<subresource>` when there is one (`nodepools/scale`).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<VecDeque<Entry>>,
}

impl RequestLog {
    pub fn record(&self, entry: Entry) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() == KEPT {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// Every entry of `user`, oldest first.
    pub fn of(&self, user: &str) -> Vec<Entry> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.iter().filter(|e| e.user == user).cloned().collect()
    }
}

/// The user a request's `Authorization` header names.
pub fn user(authorization: Option<&str>) -> String {
    authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .map_or_else(|| "system:anonymous".to_owned(), str::to_owned)
}

/// The RBAC verb of a request: by method, and whether it names one object or watches.
pub fn verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match (method, named) {
        (&Method::GET, _) if watch => "watch",
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_rbacs() {
        assert_eq!(verb(&Method::GET, true, false), "get");
        assert_eq!(verb(&Method::GET, false, false), "list");
        assert_eq!(verb(&Method::GET, false, true), "watch");
        assert_eq!(verb(&Method::POST, false, false), "create");
        assert_eq!(verb(&Method::PATCH, true, false), "patch");
        assert_eq!(verb(&Method::DELETE, true, false), "delete");
        assert_eq!(verb(&Method::DELETE, false, false), "deletecollection");
    }

    #[test]
    fn a_bearer_token_names_its_user() {
        assert_eq!(user(Some("Bearer hcpflow-activity")), "hcpflow-activity");
        assert_eq!(user(None), "system:anonymous");
        assert_eq!(user(Some("Basic abc")), "system:anonymous");
    }

    #[test]
    fn the_log_keeps_each_users_entries_in_order() {
        let log = RequestLog::default();
        for (user, name) in [("a", "1"), ("b", "2"), ("a", "3")] {
            log.record(Entry {
                user: user.into(),
                verb: "get",
                group: String::new(),
                resource: "secrets".into(),
                namespace: Some("ns".into()),
                name: Some(name.into()),
            });
        }
        let names: Vec<_> = log.of("a").into_iter().map(|e| e.name.unwrap()).collect();
        assert_eq!(names, ["1", "3"]);
    }
}
