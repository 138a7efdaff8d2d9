//! Ten thousand hostile API messages against a running server (issue 18): every reply a
//! documented error, nothing recorded from a refused request, the server still working.

use std::time::Duration;

use hcpflow_protocol::subjects::Subjects;
use serde_json::{json, Value};

use crate::support::{stack, unique, Server};

/// One hostile API message: its verb, its body, and the id of the start it carries
/// when it is one (which must never be recorded).
struct Hostile {
    verb: String,
    body: Vec<u8>,
    start_id: Option<String>,
}

/// The `n`th message of the storm: every verb, wrong types, truncated and huge bodies,
/// unicode, sealed-looking secrets, unknown verbs and types.
fn hostile(n: u64, prefix: &str, live: &str, rng: &mut impl rand::Rng) -> Hostile {
    const VERBS: [&str; 10] = [
        "start", "destroy", "describe", "list", "history", "signal", "cancel", "clusters",
        "verify", "nope",
    ];
    let verb = VERBS[rng.gen_range(0..VERBS.len())].to_owned();
    let id = format!("{prefix}-h{n}");
    // Over the size limit: one in 500, whatever the verb.
    if n.is_multiple_of(500) {
        let mut body = format!("{{\"workflow_type\": \"noop_chain\", \"workflow_id\": \"{id}\", \"input\": {{\"pad\": \"");
        body.push_str(&"x".repeat(1024 * 1024 + 1));
        body.push_str("\"}}");
        return Hostile {
            start_id: Some(id).filter(|_| verb == "start" || verb == "destroy"),
            verb,
            body: body.into_bytes(),
        };
    }
    let wrong = [
        json!(null),
        json!(7),
        json!(-1),
        json!(1e300),
        json!("\u{202e}ünï\u{0}côdé"),
        json!([1, 2, 3]),
        json!({"nested": {"deep": [null]}}),
        json!("sealed:v2:dev:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        json!("a".repeat(300)),
    ];
    let pick = |rng: &mut dyn rand::RngCore| wrong[(rng.next_u32() as usize) % wrong.len()].clone();
    let (body, start_id) = match rng.gen_range(0..9) {
        // A start of a real type with a wrong input, or a secret already sealed.
        0 => (
            json!({"workflow_type": "create_hosted_cluster", "workflow_id": id,
                   "input": {"name": pick(rng), "pull_secret": "sealed:v2:dev:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}),
            Some(id.clone()),
        ),
        1 => (
            {
                let steps = [json!(null), json!(-1), json!(1e300), json!("7"), json!([7])];
                let steps = steps[rng.gen_range(0..steps.len())].clone();
                json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": steps}})
            },
            Some(id.clone()),
        ),
        2 => (
            json!({"workflow_type": pick(rng), "workflow_id": id, "input": {}}),
            Some(id.clone()),
        ),
        // A start claiming a parent that did not start it.
        3 => (
            json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1},
                   "parent": {"workflow_id": format!("{prefix}-nobody"), "seq": 2}}),
            Some(id.clone()),
        ),
        // Every field of every verb with a value of the wrong type.
        4 => (
            json!({"workflow_id": pick(rng), "limit": pick(rng), "cursor": pick(rng),
                   "from_seq": pick(rng), "raw": pick(rng), "signal": pick(rng),
                   "status": pick(rng), "include_destroyed": pick(rng)}),
            None,
        ),
        // Truncated JSON.
        5 => {
            let text =
                json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1}})
                    .to_string();
            let cut = rng.gen_range(1..text.len() - 1);
            return Hostile {
                body: text.as_bytes()[..cut].to_vec(),
                start_id: Some(id).filter(|_| verb == "start"),
                verb,
            };
        }
        // Bytes that are not UTF-8.
        6 => {
            let bytes = (0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>()).collect();
            return Hostile {
                verb,
                body: bytes,
                start_id: None,
            };
        }
        // Wrong fields aimed at a live workflow (signals with any payload may land; a
        // cancel's reason is always of the wrong type, so no cancel does).
        7 => (
            json!({"workflow_id": live, "signal": pick(rng), "payload": pick(rng),
                   "reason": 7, "from_seq": pick(rng)}),
            None,
        ),
        _ => (json!(pick(rng)), None),
    };
    Hostile {
        body: serde_json::to_vec(&body).unwrap(),
        start_id: start_id.filter(|_| verb == "start" || verb == "destroy"),
        verb,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_hostile_messages_get_documented_answers_and_record_nothing() {
    use futures::StreamExt;
    use rand::SeedableRng;

    let Some(env) =
        stack("ten_thousand_hostile_messages_get_documented_answers_and_record_nothing")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("storm");
    let server = Server::start(env, &prefix, &[]).await;
    // A workflow that lives through the storm, the target of forged tasks and signals.
    let live = format!("{prefix}-live");
    let started = server
        .start_workflow("noop_chain", &live, json!({"steps": 40, "sleep_ms": 100}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(18);
    let messages: Vec<Hostile> = (0..10_000)
        .map(|n| hostile(n, &prefix, &live, &mut rng))
        .collect();
    // Forged tasks on the internal subjects too: for workflows that do not exist, and
    // for every early attempt of the live one.
    let subjects = Subjects::new(&server.prefix).unwrap();
    let live_attempts = (1..=120).flat_map(|seq| (1..=2).map(move |attempt| (seq, attempt)));
    let forged_tasks = live_attempts
        .map(|(seq, attempt)| json!({"workflow_id": live, "scheduled_seq": seq, "attempt": attempt}))
        .chain((0..200).map(|n| {
            json!({"workflow_id": format!("{prefix}-ghost{n}"), "scheduled_seq": 1, "attempt": 1})
        }));
    for forged in forged_tasks {
        server
            .client
            .publish(
                subjects.activity_tasks("default"),
                serde_json::to_vec(&forged).unwrap().into(),
            )
            .await
            .unwrap();
    }
    for n in 0..200 {
        server
            .client
            .publish(
                subjects.workflow_tasks(),
                format!("{{\"workflow_id\": {n}").into(),
            )
            .await
            .unwrap();
    }
    const DOCUMENTED: [&str; 8] = [
        "invalid_json",
        "invalid_request",
        "unknown_workflow_type",
        "too_large",
        "conflict",
        "not_found",
        "unavailable",
        "internal",
    ];
    let replies: Vec<(Option<String>, Result<Value, String>)> = futures::stream::iter(messages)
        .map(|message| {
            let client = server.client.clone();
            let subject = format!("{}.api.v1.{}", server.prefix, message.verb);
            async move {
                let reply = tokio::time::timeout(
                    Duration::from_secs(30),
                    client.request(subject, message.body.into()),
                )
                .await;
                let reply = match reply {
                    Ok(Ok(reply)) => serde_json::from_slice::<Value>(&reply.payload)
                        .map_err(|e| format!("the reply is not JSON: {e}")),
                    Ok(Err(error)) => Err(format!("no reply: {error}")),
                    Err(_) => Err("no reply in 30 s".to_owned()),
                };
                (message.start_id, reply)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut refused_starts = Vec::new();
    let mut too_large = 0;
    for (start_id, reply) in &replies {
        let reply = reply.as_ref().unwrap_or_else(|e| panic!("{e}"));
        if reply["ok"] == json!(true) {
            // Only a read may succeed (its unknown fields ignored); never a start.
            assert!(start_id.is_none(), "a hostile start was accepted: {reply}");
            continue;
        }
        let code = reply["error"]["code"].as_str().unwrap_or("");
        assert!(DOCUMENTED.contains(&code), "an undocumented reply: {reply}");
        assert_ne!(code, "internal", "{reply}");
        too_large += usize::from(code == "too_large");
        if let Some(id) = start_id {
            refused_starts.push(id.clone());
        }
    }
    assert!(refused_starts.len() > 500, "{}", refused_starts.len());
    assert!(
        too_large >= 20,
        "oversized bodies answered too_large: {too_large}"
    );
    // Nothing a refused request carried was recorded.
    for id in refused_starts
        .iter()
        .filter(|id| hcpflow_engine::WorkflowId::new(id.as_str()).is_ok())
    {
        let found = server
            .store
            .get_workflow(&hcpflow_engine::WorkflowId::new(id.as_str()).unwrap())
            .await;
        assert!(
            matches!(found, Err(hcpflow_eventstore::Error::NotFound(_))),
            "{id} was recorded although its start was refused"
        );
    }
    // The live workflow went its way: each step ran and was recorded once.
    assert_eq!(
        server.wait_terminal(&live, Duration::from_secs(120)).await,
        "completed"
    );
    let history = crate::histories::history(&server, &live).await;
    let completed = history
        .iter()
        .filter(|e| e["type"] == "ActivityCompleted")
        .count();
    assert_eq!(completed, 40, "one outcome per step");
    // And the server still works.
    let id = format!("{prefix}-after");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 2}))
        .await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
    // No start got through, with an id or without one: the deployment holds the two
    // workflows this test started, nothing else.
    let filter = hcpflow_eventstore::WorkflowFilter {
        events_prefix: Some(format!("{prefix}.events.")),
        ..Default::default()
    };
    let recorded = server
        .store
        .list_workflows(&filter, 100, None)
        .await
        .unwrap();
    let mut ids: Vec<String> = recorded
        .workflows
        .iter()
        .map(|w| w.workflow_id.to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![format!("{prefix}-after"), live], "{ids:?}");
}
