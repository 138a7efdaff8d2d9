//! `hcpflow nats permissions`: the NATS accounts configuration that gives every process
//! role and every tenant's client role exactly the subjects it needs (README "Security
//! model"). Generated from the same subject names the code uses, so the shipped file
//! (`deploy/nats/`) and the code cannot drift: `--check FILE` fails when they differ.
//!
//! Passwords are never in the file: each user's is a NATS variable
//! (`$HCPFLOW_NATS_PASSWORD_<USER>`), which nats-server reads from its environment.

use std::fmt::Write as _;

use crate::api::submit::intake_consumers;
use crate::runtime::{dead_letter, nats};
use hcpflow_engine::TenantId;
use hcpflow_protocol::requests::{
    ApiRequest, CancelRequest, ClustersRequest, DescribeRequest, DestroyRequest, HistoryRequest,
    ListRequest, SignalRequest, StartRequest, VerifyRequest,
};
use hcpflow_protocol::{StreamRole, Subjects};

/// The NATS account every hcpflow user lives in (JetStream enabled).
pub const ACCOUNT: &str = "HCPFLOW";

/// What a deployment's configuration is generated for.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub subjects: Subjects,
    pub tenants: Vec<TenantId>,
    pub task_queues: Vec<String>,
}

/// One NATS user: its name, inbox prefix, and what it may publish and subscribe to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsUser {
    pub name: String,
    /// What it is for, written above it in the file.
    pub purpose: String,
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
    /// May reply to requests it received (the API).
    pub allow_responses: bool,
}

impl NatsUser {
    /// The inbox prefix the user's client must use (`--nats-inbox-prefix`): replies to
    /// its requests arrive there, and only it may read them.
    pub fn inbox_prefix(&self) -> String {
        format!("_INBOX_{}", self.name)
    }

    /// The environment variable nats-server reads the user's password from.
    pub fn password_variable(&self) -> String {
        format!(
            "HCPFLOW_NATS_PASSWORD_{}",
            self.name.to_ascii_uppercase().replace('-', "_")
        )
    }
}

/// The process roles' needs, by what each one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Process {
    Migrate,
    Api,
    Workflow,
    Activity,
    Relay,
    Timer,
}

impl Process {
    const ALL: [Process; 6] = [
        Process::Migrate,
        Process::Api,
        Process::Workflow,
        Process::Activity,
        Process::Relay,
        Process::Timer,
    ];

    fn name(self) -> &'static str {
        match self {
            Process::Migrate => "migrate",
            Process::Api => "api",
            Process::Workflow => "workflow",
            Process::Activity => "activity",
            Process::Relay => "relay",
            Process::Timer => "timer",
        }
    }

    fn purpose(self) -> &'static str {
        match self {
            Process::Migrate => "`hcpflow migrate`: creates and updates the streams (nothing else can, and nothing can delete them)",
            Process::Api => "`hcpflow worker --role api`: answers the API, takes submissions",
            Process::Workflow => "`hcpflow worker --role workflow`: workflow tasks and the sweeper",
            Process::Activity => "`hcpflow worker --role activity`: activity tasks",
            Process::Relay => "`hcpflow worker --role relay`: the outbox relay and the checkpointer (the witness stream)",
            Process::Timer => "`hcpflow worker --role timer`: durable timers",
        }
    }
}

/// A client role of a tenant, by the verbs it may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientRole {
    Reader,
    Operator,
    Admin,
}

impl ClientRole {
    const ALL: [ClientRole; 3] = [ClientRole::Reader, ClientRole::Operator, ClientRole::Admin];

    fn name(self) -> &'static str {
        match self {
            ClientRole::Reader => "reader",
            ClientRole::Operator => "operator",
            ClientRole::Admin => "admin",
        }
    }

    fn verbs(self) -> &'static [&'static str] {
        const READ: [&str; 5] = [
            DescribeRequest::VERB,
            ListRequest::VERB,
            HistoryRequest::VERB,
            ClustersRequest::VERB,
            VerifyRequest::VERB,
        ];
        const OPERATE: [&str; 8] = [
            DescribeRequest::VERB,
            ListRequest::VERB,
            HistoryRequest::VERB,
            ClustersRequest::VERB,
            VerifyRequest::VERB,
            StartRequest::VERB,
            SignalRequest::VERB,
            CancelRequest::VERB,
        ];
        const ADMINISTER: [&str; 9] = [
            DescribeRequest::VERB,
            ListRequest::VERB,
            HistoryRequest::VERB,
            ClustersRequest::VERB,
            VerifyRequest::VERB,
            StartRequest::VERB,
            SignalRequest::VERB,
            CancelRequest::VERB,
            DestroyRequest::VERB,
        ];
        match self {
            ClientRole::Reader => &READ,
            ClientRole::Operator => &OPERATE,
            ClientRole::Admin => &ADMINISTER,
        }
    }
}

impl Deployment {
    /// Every user of the deployment: the process roles, the split deployment's engine
    /// (workflow, relay and timer), an all-roles `server`, then each tenant's reader,
    /// operator and admin.
    pub fn users(&self) -> Vec<NatsUser> {
        let mut users: Vec<NatsUser> = Process::ALL
            .iter()
            .map(|process| self.process_user(&[*process], process.name(), process.purpose()))
            .collect();
        let runtime: Vec<Process> = Process::ALL
            .into_iter()
            .filter(|p| *p != Process::Migrate)
            .collect();
        users.push(self.process_user(
            &[Process::Workflow, Process::Relay, Process::Timer],
            "engine",
            "`hcpflow worker --role workflow,relay,timer`: the engine of a split deployment, apart from the API and the activity workers",
        ));
        users.push(self.process_user(
            &runtime,
            "server",
            "`hcpflow server`: every runtime role in one process (not migrate)",
        ));
        for tenant in &self.tenants {
            for role in ClientRole::ALL {
                users.push(self.client_user(tenant, role));
            }
        }
        users
    }

    fn user_name(&self, role: &str) -> String {
        format!("{}-{role}", self.subjects.prefix())
    }

    fn process_user(&self, processes: &[Process], role: &str, purpose: &str) -> NatsUser {
        let s = &self.subjects;
        let mut user = NatsUser {
            name: self.user_name(role),
            purpose: purpose.to_owned(),
            publish: Vec::new(),
            subscribe: Vec::new(),
            allow_responses: false,
        };
        user.subscribe.push(format!("{}.>", user.inbox_prefix()));
        // Every process checks at start that the streams exist.
        for role in StreamRole::ALL {
            user.publish
                .push(format!("$JS.API.STREAM.INFO.{}", s.stream(role)));
        }
        for process in processes {
            match process {
                Process::Migrate => {
                    // The witness is made once and never changed: tighter limits
                    // would age its checkpoints out.
                    for role in StreamRole::ALL {
                        let stream = s.stream(role);
                        user.publish.push(format!("$JS.API.STREAM.CREATE.{stream}"));
                        if role != StreamRole::Audit {
                            user.publish.push(format!("$JS.API.STREAM.UPDATE.{stream}"));
                        }
                    }
                }
                Process::Api => {
                    user.subscribe.push(s.api_all());
                    user.allow_responses = true;
                    // The witness's latest checkpoint, for `verify`.
                    user.publish.push(format!(
                        "$JS.API.STREAM.MSG.GET.{}",
                        s.stream(StreamRole::Audit)
                    ));
                    for intake in intake_consumers(s) {
                        consume(&mut user, &s.stream(intake.stream), intake.durable);
                        let refused = s.dead_letter(intake.source.dead_letter_source());
                        user.publish.push(refused);
                    }
                }
                Process::Workflow => {
                    let tasks = s.stream(StreamRole::Tasks);
                    consume(&mut user, &tasks, nats::WORKFLOW_CONSUMER);
                    user.publish.push(s.dead_letter(dead_letter::TASKS));
                }
                Process::Activity => {
                    for queue in &self.task_queues {
                        let tasks = s.stream(StreamRole::Tasks);
                        consume(&mut user, &tasks, &nats::activity_consumer(queue));
                    }
                    user.publish.push(s.dead_letter(dead_letter::TASKS));
                }
                Process::Relay => user.publish.push(s.audit_all()),
                Process::Timer => {}
            }
            if *process != Process::Migrate {
                // What a commit of any role sends on: its events, the tasks it causes
                // and the children it starts (on the task stream).
                user.publish.push(s.events_all());
                user.publish.push(s.tasks_all());
            }
        }
        user.publish.sort();
        user.publish.dedup();
        user.subscribe.sort();
        user.subscribe.dedup();
        user
    }

    fn client_user(&self, tenant: &TenantId, role: ClientRole) -> NatsUser {
        let s = &self.subjects;
        let mut user = NatsUser {
            name: self.user_name(&format!("{tenant}-{}", role.name())),
            purpose: format!("a {} of tenant {tenant}", role.name()),
            publish: Vec::new(),
            subscribe: Vec::new(),
            allow_responses: false,
        };
        user.subscribe.push(format!("{}.>", user.inbox_prefix()));
        for verb in role.verbs() {
            user.publish.push(s.tenant_api(tenant, verb));
            if tenant.is_default() {
                // The default tenant is also reachable by its name.
                user.publish
                    .push(format!("{}.api.v1.{tenant}.{verb}", s.prefix()));
            }
        }
        if role != ClientRole::Reader {
            user.publish.push(s.tenant_submit_start(tenant));
        }
        // Following a workflow's progress: the tenant's events only.
        user.subscribe.push(s.events(tenant, "*"));
        user.publish.sort();
        user.subscribe.sort();
        user
    }

    /// The configuration file's text: an account with JetStream, and every user.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let tenants: Vec<&str> = self.tenants.iter().map(TenantId::as_str).collect();
        let _ = writeln!(
            out,
            "# Generated by `hcpflow nats permissions --prefix {} --tenants {} --task-queues {}`.",
            self.subjects.prefix(),
            tenants.join(","),
            self.task_queues.join(",")
        );
        out.push_str(
            "# Do not edit: change the code, regenerate, and check with `--check FILE`.\n\
             # Include it from nats-server's configuration (`include \"hcpflow-accounts.conf\"`);\n\
             # each password comes from nats-server's environment, named beside its user.\n\
             # No user may delete or purge a stream, nor change the witness: it stays.\n",
        );
        let _ = writeln!(
            out,
            "accounts {{\n  {ACCOUNT} {{\n    jetstream: enabled\n    users: ["
        );
        for user in self.users() {
            let _ = writeln!(out, "      # {}", user.purpose);
            let _ = writeln!(
                out,
                "      # client inbox prefix: {} (--nats-inbox-prefix)",
                user.inbox_prefix()
            );
            let _ = writeln!(
                out,
                "      {{ user: \"{}\", password: ${}, permissions: {{",
                user.name,
                user.password_variable()
            );
            let _ = writeln!(out, "          publish: {{");
            let _ = writeln!(out, "            allow: {}", list(&user.publish));
            let _ = writeln!(
                out,
                "            deny: [\"$JS.API.STREAM.DELETE.>\", \"$JS.API.STREAM.PURGE.>\", \"$JS.API.STREAM.MSG.DELETE.>\"]"
            );
            let _ = writeln!(out, "          }}");
            let _ = writeln!(
                out,
                "          subscribe: {{ allow: {} }}",
                list(&user.subscribe)
            );
            if user.allow_responses {
                let _ = writeln!(out, "          allow_responses: true");
            }
            let _ = writeln!(out, "      }} }}");
        }
        out.push_str("    ]\n  }\n}\n");
        out
    }
}

/// What a durable pull consumer of `stream` named `durable` needs: to look itself up,
/// be created, pull, and acknowledge.
fn consume(user: &mut NatsUser, stream: &str, durable: &str) {
    user.publish.extend([
        format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}.>"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
        format!("$JS.ACK.{stream}.{durable}.>"),
    ]);
}

/// Subjects as a quoted NATS list (quoted: a bare `$JS...` would be read as a variable).
fn list(subjects: &[String]) -> String {
    let quoted: Vec<String> = subjects.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Deployment {
        Deployment {
            subjects: Subjects::new("hcpflow").unwrap(),
            tenants: vec![TenantId::default_tenant(), TenantId::new("acme").unwrap()],
            task_queues: vec!["default".into()],
        }
    }

    fn user(name: &str) -> NatsUser {
        deployment()
            .users()
            .into_iter()
            .find(|u| u.name == name)
            .unwrap_or_else(|| panic!("no user {name}"))
    }

    #[test]
    fn only_migrate_creates_streams_and_nobody_deletes_one() {
        for user in deployment().users() {
            let creates = user.publish.iter().any(|s| s.contains("STREAM.CREATE"));
            assert_eq!(creates, user.name == "hcpflow-migrate", "{}", user.name);
            assert!(
                !user
                    .publish
                    .iter()
                    .any(|s| s.contains("STREAM.UPDATE.HCPFLOW_AUDIT")),
                "{} may change the witness stream",
                user.name
            );
            assert!(
                !user
                    .publish
                    .iter()
                    .any(|s| s.contains("DELETE") || s.contains("PURGE")),
                "{}",
                user.name
            );
        }
        assert!(deployment().render().contains("$JS.API.STREAM.DELETE.>"));
    }

    #[test]
    fn clients_reach_their_tenants_verbs_and_nothing_internal() {
        let reader = user("hcpflow-acme-reader");
        assert!(reader
            .publish
            .contains(&"hcpflow.api.v1.acme.describe".into()));
        assert!(!reader.publish.iter().any(|s| s.ends_with(".start")));
        let operator = user("hcpflow-acme-operator");
        assert!(operator
            .publish
            .contains(&"hcpflow.api.v1.acme.start".into()));
        assert!(operator
            .publish
            .contains(&"hcpflow.submit.v1.acme.start".into()));
        assert!(!operator.publish.iter().any(|s| s.ends_with(".destroy")));
        let admin = user("hcpflow-acme-admin");
        assert!(admin
            .publish
            .contains(&"hcpflow.api.v1.acme.destroy".into()));
        for client in [reader, operator, admin] {
            assert!(client
                .publish
                .iter()
                .all(|s| s.starts_with("hcpflow.api.v1.acme.")
                    || s == "hcpflow.submit.v1.acme.start"));
            assert_eq!(
                client.subscribe,
                vec![
                    format!("_INBOX_{}.>", client.name),
                    "hcpflow.events.acme.*".to_owned()
                ]
            );
        }
        let default = user("hcpflow-default-reader");
        assert!(default.publish.contains(&"hcpflow.api.v1.describe".into()));
        assert!(default.subscribe.contains(&"hcpflow.events.*".into()));
    }

    #[test]
    fn the_api_alone_answers_requests() {
        for user in deployment().users() {
            let answers = user.subscribe.contains(&"hcpflow.api.v1.>".to_owned());
            assert_eq!(
                answers,
                ["hcpflow-api", "hcpflow-server"].contains(&user.name.as_str()),
                "{}",
                user.name
            );
            assert_eq!(user.allow_responses, answers, "{}", user.name);
        }
    }
}
