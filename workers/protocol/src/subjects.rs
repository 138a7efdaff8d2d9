//! Subject and stream names, all derived from one configurable prefix (DESIGN.md §4).

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

    /// `<prefix>.api.v1.<verb>`.
    pub fn api(&self, verb: &str) -> String {
        format!("{}.api.v1.{verb}", self.prefix)
    }

    pub fn api_all(&self) -> String {
        format!("{}.api.v1.>", self.prefix)
    }

    /// The verb of an API subject, if it is one.
    pub fn api_verb<'s>(&self, subject: &'s str) -> Option<&'s str> {
        subject
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix(".api.v1."))
    }

    pub fn submit_start(&self) -> String {
        format!("{}.submit.v1.start", self.prefix)
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

    pub fn tasks_all(&self) -> String {
        format!("{}.task.>", self.prefix)
    }

    pub fn events(&self, workflow_id: &str) -> String {
        format!("{}.events.{workflow_id}", self.prefix)
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
        assert_eq!(s.api_verb("hcpflow.api.v1.describe"), Some("describe"));
        assert_eq!(s.api_verb("other.api.v1.describe"), None);
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
