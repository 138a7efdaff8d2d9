//! Subject and stream names, all derived from one configurable prefix (DESIGN.md §4).

use hcpflow_engine::{IdError, TenantId};

/// The prefix was not a single NATS subject token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the subject prefix must be 1-64 characters of A-Z, a-z, 0-9, '_' and '-', got {0:?}")]
pub struct InvalidPrefix(pub String);

/// `hcpflow.api.v1.start`, stream `HCPFLOW_TASKS`, ... for the prefix `hcpflow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

/// The streams, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRole {
    Submit,
    Tasks,
    Events,
    DeadLetter,
    /// The witness: signed checkpoints, append-only (no delete, no purge).
    Audit,
}

impl StreamRole {
    pub const ALL: [StreamRole; 5] = [
        Self::Submit,
        Self::Tasks,
        Self::Events,
        Self::DeadLetter,
        Self::Audit,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Self::Submit => "SUBMIT",
            Self::Tasks => "TASKS",
            Self::Events => "EVENTS",
            Self::DeadLetter => "DEADLETTER",
            Self::Audit => "AUDIT",
        }
    }
}

impl Subjects {
    pub fn new(prefix: &str) -> Result<Self, InvalidPrefix> {
        let valid = !prefix.is_empty()
            && prefix.len() <= 64
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if valid {
            Ok(Self {
                prefix: prefix.to_owned(),
            })
        } else {
            Err(InvalidPrefix(prefix.to_owned()))
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>.api.v1.<verb>`: the default tenant's API.
    pub fn api(&self, verb: &str) -> String {
        format!("{}.api.v1.{verb}", self.prefix)
    }

    /// `<prefix>.api.v1.<tenant>.<verb>`; the default tenant's is `api(verb)` (its
    /// `<prefix>.api.v1.default.<verb>` is served too).
    pub fn tenant_api(&self, tenant: &TenantId, verb: &str) -> String {
        if tenant.is_default() {
            self.api(verb)
        } else {
            format!("{}.api.v1.{tenant}.{verb}", self.prefix)
        }
    }

    pub fn api_all(&self) -> String {
        format!("{}.api.v1.>", self.prefix)
    }

    /// The tenant and verb of an API subject, if it is one: `<prefix>.api.v1.<verb>` is
    /// the default tenant's; `<prefix>.api.v1.<tenant>.<verb>` names its tenant, which
    /// may be invalid (the caller answers that).
    pub fn api_route<'s>(&self, subject: &'s str) -> Option<(Result<TenantId, IdError>, &'s str)> {
        let rest = subject
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix(".api.v1."))?;
        Some(match rest.split_once('.') {
            Some((tenant, verb)) => (TenantId::new(tenant), verb),
            None => (Ok(TenantId::default_tenant()), rest),
        })
    }

    /// The default tenant's submit subject, `<prefix>.submit.v1.start`.
    pub fn submit_start(&self) -> String {
        format!("{}.submit.v1.start", self.prefix)
    }

    /// `<prefix>.submit.v1.<tenant>.start`; the default tenant's is `submit_start()`.
    pub fn tenant_submit_start(&self, tenant: &TenantId) -> String {
        if tenant.is_default() {
            self.submit_start()
        } else {
            format!("{}.submit.v1.{tenant}.start", self.prefix)
        }
    }

    /// The filter of every named tenant's submissions (`submit_start()` not included:
    /// work-queue consumers may not overlap).
    pub fn tenant_submit_all(&self) -> String {
        format!("{}.submit.v1.*.start", self.prefix)
    }

    /// The tenant a submission was sent for.
    pub fn submit_tenant(&self, subject: &str) -> Result<TenantId, IdError> {
        match subject
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix(".submit.v1."))
            .and_then(|rest| rest.strip_suffix(".start"))
        {
            Some(tenant) => TenantId::new(tenant),
            None => Ok(TenantId::default_tenant()),
        }
    }

    pub fn submit_all(&self) -> String {
        format!("{}.submit.v1.>", self.prefix)
    }

    pub fn workflow_tasks(&self) -> String {
        format!("{}.task.workflow", self.prefix)
    }

    pub fn activity_tasks(&self, task_queue: &str) -> String {
        format!("{}.task.activity.{task_queue}", self.prefix)
    }

    /// `<prefix>.task.child`: the starts of child workflows, which only the server's own
    /// processes may publish (on the task stream, which clients cannot reach).
    pub fn child_starts(&self) -> String {
        format!("{}.task.child", self.prefix)
    }

    pub fn tasks_all(&self) -> String {
        format!("{}.task.>", self.prefix)
    }

    /// `<prefix>.events.<tenant>.<workflow_id>`; the default tenant's workflows keep
    /// `<prefix>.events.<workflow_id>`.
    pub fn events(&self, tenant: &TenantId, workflow_id: &str) -> String {
        if tenant.is_default() {
            format!("{}.events.{workflow_id}", self.prefix)
        } else {
            format!("{}.events.{tenant}.{workflow_id}", self.prefix)
        }
    }

    pub fn events_all(&self) -> String {
        format!("{}.events.>", self.prefix)
    }

    pub fn dead_letter(&self, source: &str) -> String {
        format!("{}.deadletter.{source}", self.prefix)
    }

    pub fn dead_letter_all(&self) -> String {
        format!("{}.deadletter.>", self.prefix)
    }

    /// `<prefix>.audit.<workflow_id>`: the workflow's signed checkpoints.
    pub fn audit(&self, workflow_id: &str) -> String {
        format!("{}.audit.{workflow_id}", self.prefix)
    }

    pub fn audit_all(&self) -> String {
        format!("{}.audit.>", self.prefix)
    }

    /// `HCPFLOW_SUBMIT`, ... : the prefix upper-cased, `-` as `_`.
    pub fn stream(&self, role: StreamRole) -> String {
        format!(
            "{}_{}",
            self.prefix.to_ascii_uppercase().replace('-', "_"),
            role.suffix()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prefix() {
        let s = Subjects::new("hcpflow").unwrap();
        assert_eq!(s.api("start"), "hcpflow.api.v1.start");
        let route = |subject| {
            s.api_route(subject)
                .map(|(t, v)| (t.map(|t| t.to_string()), v))
        };
        assert_eq!(
            route("hcpflow.api.v1.describe"),
            Some((Ok("default".into()), "describe"))
        );
        assert_eq!(
            route("hcpflow.api.v1.acme.describe"),
            Some((Ok("acme".into()), "describe"))
        );
        assert!(matches!(
            route("hcpflow.api.v1.ACME.list"),
            Some((Err(_), "list"))
        ));
        assert_eq!(route("other.api.v1.describe"), None);
        let acme = TenantId::new("acme").unwrap();
        let default = TenantId::default_tenant();
        assert_eq!(s.tenant_api(&acme, "list"), "hcpflow.api.v1.acme.list");
        assert_eq!(s.tenant_api(&default, "list"), "hcpflow.api.v1.list");
        assert_eq!(s.events(&acme, "w1"), "hcpflow.events.acme.w1");
        assert_eq!(s.events(&default, "w1"), "hcpflow.events.w1");
        assert_eq!(s.tenant_submit_start(&acme), "hcpflow.submit.v1.acme.start");
        assert_eq!(s.submit_tenant("hcpflow.submit.v1.acme.start"), Ok(acme));
        assert_eq!(s.submit_tenant("hcpflow.submit.v1.start"), Ok(default));
        assert_eq!(s.submit_start(), "hcpflow.submit.v1.start");
        assert_eq!(s.activity_tasks("default"), "hcpflow.task.activity.default");
        assert_eq!(s.stream(StreamRole::Tasks), "HCPFLOW_TASKS");
        assert_eq!(
            Subjects::new("my-app").unwrap().stream(StreamRole::Events),
            "MY_APP_EVENTS"
        );
        assert!(Subjects::new("a.b").is_err());
        assert!(Subjects::new("").is_err());
    }
}
