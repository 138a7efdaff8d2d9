//! Audit evidence against a real server: ended histories get signed checkpoints in
//! Postgres and on the witness stream; `hcpflow audit verify` passes an untouched
//! history and names each kind of tampering (a changed event, a truncated history, a
//! rewritten chain, an event appended behind the engine's back, a removed checkpoint);
//! `audit export` + `verify-file` work offline and catch a changed byte or a cut file;
//! `audit replay` and `timeline` run on the recorded history.

use std::time::Duration;

use hcpflow_engine::{canonical, ChainHash};
use serde_json::{json, Value};
use sqlx::Connection;

use crate::support::{env_value, output_json, output_text, run_cli, stack, unique, Server};

/// A superuser connection: the only way to tamper with the append-only log.
async fn superuser(env: &[(String, String)]) -> sqlx::PgConnection {
    sqlx::PgConnection::connect(&env_value(env, "HCPFLOW_DATABASE_SUPERUSER_URL"))
        .await
        .unwrap()
}

async fn tamper(env: &[(String, String)], statements: &[String]) {
    let mut db = superuser(env).await;
    // Replica mode skips the append-only triggers, as an attacker with the owner's
    // rights could.
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut db)
        .await
        .unwrap();
    for statement in statements {
        sqlx::query(statement).execute(&mut db).await.unwrap();
    }
}

/// The statement that replaces `from` with `to` in the body of event `seq` of `id`.
fn body_replaced(id: &str, seq: u64, from: &str, to: &str) -> String {
    format!(
        "UPDATE events SET body = convert_to(replace(convert_from(body, 'UTF8'), '{from}', '{to}'), 'UTF8')
          WHERE workflow_id = '{id}' AND seq = {seq}"
    )
}

/// The stack, for a test that tampers with the log and checks signatures: it needs the
/// superuser's URL and the audit signing key too (a stack that must be there has them).
fn tampering_stack(test: &str) -> Option<Vec<(String, String)>> {
    let env = stack(test)?;
    if std::env::var("HCPFLOW_DATABASE_SUPERUSER_URL").is_err()
        || std::env::var("HCPFLOW_AUDIT_SIGNING_KEY").is_err()
    {
        assert!(std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none());
        return None;
    }
    Some(env)
}

async fn verify(server: &Server, id: &str) -> (bool, String) {
    let output = run_cli(server, &["audit", "verify", id]).await;
    let (stdout, stderr) = output_text(&output);
    (output.status.success(), format!("{stdout}\n{stderr}"))
}

/// A completed 3-step noop_chain (9 events with its compensation registrations).
async fn completed(server: &Server, id: &str) {
    let reply = server
        .start_workflow("noop_chain", id, json!({"steps": 3}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(
        server.wait_terminal(id, Duration::from_secs(60)).await,
        "completed"
    );
}

async fn events(server: &Server, id: &str) -> Vec<Value> {
    let history = server
        .api(
            "history",
            json!({"workflow_id": id, "limit": 1000, "raw": true}),
        )
        .await;
    history["events"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampering_is_named_and_exports_verify_offline() {
    let Some(env) = tampering_stack("tampering_is_named_and_exports_verify_offline") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("aud");
    let server = Server::start(env.clone(), &prefix, &[]).await;
    let cases = [
        "clean",
        "changed",
        "truncated",
        "rewritten",
        "appended",
        "unsigned",
    ];
    let ids: Vec<String> = cases.iter().map(|c| format!("{prefix}-{c}")).collect();
    for id in &ids {
        completed(&server, id).await;
    }
    // Every one verifies (verify waits for the final checkpoint).
    for id in &ids {
        let (ok, text) = verify(&server, id).await;
        assert!(ok, "{text}");
        assert!(text.contains("chain verified"), "{text}");
    }
    let report = output_json(&run_cli(&server, &["audit", "verify", &ids[0], "-o", "json"]).await);
    let last = events(&server, &ids[0]).await.len() as u64;
    assert_eq!(
        report[0]["signed_seq"], last,
        "signed at the last event: {report}"
    );

    // A changed event: the chain breaks there.
    let id = &ids[1];
    tamper(&env, &[body_replaced(id, 3, "\"v\":1", "\"v\":2")]).await;
    let (ok, text) = verify(&server, id).await;
    assert!(!ok && text.contains("broken at seq 3"), "{text}");

    // Truncated: the last events removed and the index moved back to match.
    let id = &ids[2];
    let kept = events(&server, id).await[3]["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    tamper(
        &env,
        &[
            format!("DELETE FROM events WHERE workflow_id = '{id}' AND seq > 4"),
            format!("UPDATE workflows SET next_seq = 5, head_hash = decode('{kept}', 'hex') WHERE workflow_id = '{id}'"),
        ],
    )
    .await;
    let (ok, text) = verify(&server, id).await;
    assert!(
        !ok && text.contains("truncated") && text.contains("now ends at seq 4"),
        "{text}"
    );

    // Rewritten: event 2 changed and every hash from there recomputed, consistently.
    let id = &ids[3];
    tamper(
        &env,
        &[
            body_replaced(id, 1, "\"steps\":3", "\"steps\":4"),
            format!(
                "DO $$ DECLARE r record; prev bytea := decode(repeat('00', 32), 'hex'); BEGIN
                   FOR r IN SELECT seq, body FROM events WHERE workflow_id = '{id}' ORDER BY seq LOOP
                     UPDATE events SET prev_hash = prev, hash = sha256(prev || r.body)
                      WHERE workflow_id = '{id}' AND seq = r.seq;
                     prev := sha256(prev || r.body);
                   END LOOP;
                   UPDATE workflows SET head_hash = prev WHERE workflow_id = '{id}';
                 END $$"
            ),
        ],
    )
    .await;
    let (ok, text) = verify(&server, id).await;
    assert!(!ok && text.contains("rewritten"), "{text}");

    // Appended behind the engine's back: a well-formed event after the end.
    let id = &ids[4];
    let history = events(&server, id).await;
    let next = history.len() as u64 + 1;
    let head = ChainHash::from_hex(history.last().unwrap()["hash"].as_str().unwrap()).unwrap();
    let body = canonical::to_vec(&json!({
        "data": {"name": "late", "payload": null, "v": 1},
        "recorded_at": "2026-11-23T12:00:00.000000Z", "seq": next,
        "type": "SignalReceived", "workflow_id": id,
    }));
    let hash = head.next(&body);
    tamper(
        &env,
        &[
            format!(
                "INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
                 VALUES ('{id}', {next}, 'SignalReceived', '2026-11-23T12:00:00Z',
                         decode('{}', 'hex'), decode('{}', 'hex'), decode('{}', 'hex'))",
                hex::encode(&body),
                head.to_hex(),
                hash.to_hex()
            ),
            format!(
                "UPDATE workflows SET next_seq = {}, head_hash = decode('{}', 'hex') WHERE workflow_id = '{id}'",
                next + 1,
                hash.to_hex()
            ),
        ],
    )
    .await;
    let (ok, text) = verify(&server, id).await;
    assert!(
        !ok && text.contains(&format!("after the final signed head, from seq {next}")),
        "{text}"
    );

    // The checkpoint removed from Postgres: the witness stream still has it.
    let id = &ids[5];
    tamper(
        &env,
        &[format!(
            "DELETE FROM audit_checkpoints WHERE workflow_id = '{id}'"
        )],
    )
    .await;
    let (ok, text) = verify(&server, id).await;
    assert!(!ok && text.contains("removed from Postgres"), "{text}");

    // The untouched one still verifies; exported, it verifies offline and replays.
    let dir = std::env::temp_dir().join(format!("hcpflow-{prefix}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("clean.jsonl");
    let file_arg = file.to_str().unwrap();
    let exported = run_cli(&server, &["audit", "export", &ids[0], "--out", file_arg]).await;
    assert!(exported.status.success(), "{:?}", output_text(&exported));
    let offline = run_cli(&server, &["audit", "verify-file", file_arg]).await;
    let (stdout, stderr) = output_text(&offline);
    assert!(offline.status.success(), "{stderr}\n{stdout}");
    assert!(
        stdout.contains("chain and signature verified") && stdout.contains("deterministic"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let mut changed = text.clone().into_bytes();
    let middle = changed.len() / 2;
    changed[middle] ^= 0x01;
    std::fs::write(dir.join("changed.jsonl"), &changed).unwrap();
    std::fs::write(dir.join("cut.jsonl"), &text[..text.len() - 40]).unwrap();
    for bad in ["changed.jsonl", "cut.jsonl"] {
        let path = dir.join(bad);
        let output = run_cli(&server, &["audit", "verify-file", path.to_str().unwrap()]).await;
        let (_, stderr) = output_text(&output);
        assert!(!output.status.success(), "{bad} passed");
        assert!(stderr.contains("does not verify"), "{bad}: {stderr}");
    }

    let replay = output_json(&run_cli(&server, &["audit", "replay", &ids[0], "-o", "json"]).await);
    assert_eq!(replay["divergence"], Value::Null, "{replay}");
    assert_eq!(replay["status"], "completed");
    let timeline = run_cli(
        &server,
        &[
            "audit",
            "timeline",
            &ids[0],
            "--html",
            dir.join("t.html").to_str().unwrap(),
        ],
    )
    .await;
    let (stdout, _) = output_text(&timeline);
    assert!(
        timeline.status.success() && stdout.contains("noop"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(dir.join("t.html")).unwrap();
    assert!(
        html.contains("<html>") && html.contains("class=\"bar done\""),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_trusts_only_the_key_it_is_given_never_the_one_the_server_reports() {
    let Some(env) =
        stack("verify_trusts_only_the_key_it_is_given_never_the_one_the_server_reports")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("pin");
    let server = Server::start(env.clone(), &prefix, &[]).await;
    let id = format!("{prefix}-chain");
    completed(&server, &id).await;
    let cli = |args: Vec<String>, key_env: bool| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hcpflow"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HCPFLOW_NATS_URL", env_value(&env, "HCPFLOW_NATS_URL"))
            .env("HCPFLOW_PREFIX", &prefix);
        if key_env {
            command.env(
                "HCPFLOW_AUDIT_SIGNING_KEY",
                env_value(&env, "HCPFLOW_AUDIT_SIGNING_KEY"),
            );
        }
        command.output()
    };
    // No key of its own: the server's word is not taken.
    let bare = cli(vec!["audit".into(), "verify".into(), id.clone()], false)
        .await
        .unwrap();
    let (_, stderr) = output_text(&bare);
    assert!(!bare.status.success());
    assert!(stderr.contains("not trusted"), "{stderr}");
    // The public key from a file, as an auditor would hold it.
    let public = cli(vec!["audit".into(), "public-key".into()], true)
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("hcpflow-{prefix}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("audit.pub");
    std::fs::write(&file, &public.stdout).unwrap();
    let pinned = cli(
        vec![
            "audit".into(),
            "verify".into(),
            id.clone(),
            "--public-key-file".into(),
            file.display().to_string(),
        ],
        false,
    )
    .await
    .unwrap();
    let (stdout, stderr) = output_text(&pinned);
    assert!(pinned.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("chain verified"), "{stdout}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A history the server wrote whole is signed as the server wrote it, not as it is
/// stored: an event changed in the database before the signature is not signed over
/// (the signed head is the hash of the bytes the server wrote), and `audit verify`
/// names the changed event against that signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_written_here_is_signed_as_written_not_as_stored() {
    let Some(env) = tampering_stack("a_history_written_here_is_signed_as_written_not_as_stored")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("wit");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let server = Server::start(
        env.clone(),
        &prefix,
        &[
            "--metrics-addr",
            &metrics_addr,
            "--max-signal-bytes",
            "1000",
        ],
    )
    .await;
    let id = format!("{prefix}-w");
    let started = server
        .start_workflow("noop_wait", &id, json!({"timer_ms": 10, "signal": "go"}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    // Waiting for its signal once the timer fired.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !events(&server, &id)
        .await
        .iter()
        .any(|e| e["type"] == "TimerFired")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the timer never fired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A step that records nothing (a signal over the limit) keeps the history it found,
    // and with it the knowledge that this process wrote all of it.
    let refused = server
        .api(
            "signal",
            json!({"workflow_id": id, "signal": "big", "payload": "x".repeat(2000)}),
        )
        .await;
    assert_eq!(refused["error"]["code"], "too_large", "{refused}");
    // The start's input changed behind the engine's back (its stored hash kept).
    tamper(&env, &[body_replaced(&id, 1, "\"go\"", "\"no\"")]).await;
    let signalled = server
        .api(
            "signal",
            json!({"workflow_id": id, "signal": "go", "payload": {}}),
        )
        .await;
    assert_eq!(signalled, json!({"ok": true}));
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    let stored = events(&server, &id).await;
    let last = stored.last().unwrap();
    let (last_seq, last_hash) = (last["seq"].clone(), last["hash"].clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let signed = loop {
        let evidence = server.api("verify", json!({"workflow_id": id})).await;
        let signed = evidence["checkpoints"]["database"].clone();
        if signed["seq"] == last_seq {
            break signed;
        }
        if std::time::Instant::now() >= deadline {
            let mut counts = Vec::new();
            for kind in ["chains_read", "heads_witnessed", "heads_deferred"] {
                let name = format!("hcpflow_checkpoint_{kind}_total");
                counts.push(format!(
                    "{kind} {}",
                    crate::histories::counter(&metrics_addr, &name).await
                ));
            }
            let events: Vec<Value> = events(&server, &id)
                .await
                .iter()
                .map(|event| json!([event["seq"], event["type"]]))
                .collect();
            panic!(
                "never signed at its end ({}): {evidence}\nevents: {events:?}",
                counts.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Signed over the chain the server computed, which the changed bytes no longer make.
    assert_eq!(signed["head_hash"], last_hash, "{signed}");
    let (ok, text) = verify(&server, &id).await;
    assert!(!ok && text.contains("broken at seq 1"), "{text}");
    let witnessed =
        crate::histories::counter(&metrics_addr, "hcpflow_checkpoint_heads_witnessed_total").await;
    assert!(witnessed >= 1, "the head was read back, not vouched for");
}
