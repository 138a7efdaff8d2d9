//! Following one workflow live: its history so far from the API, then its events as
//! they are published on `<prefix>.events.<id>`, drawn by [`Progress`] with a spinner
//! line on a terminal.
//!
//! Postgres is the truth: a gap in the live events (a message missed, a relay that
//! publishes late) is filled from the history API, and a quiet stream is re-checked
//! every few seconds, so the display never waits on a message that will not come.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

use crate::cli::progress::{seconds, Progress};
use hcpflow_protocol::client::ApiClient;

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(120);
/// How long without a live event before the history is read again.
const QUIET: Duration = Duration::from_secs(3);
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// How following ended.
#[derive(Debug)]
pub enum Followed {
    /// The workflow reached a terminal event (in `progress.outcome`).
    Ended(Progress),
    /// The workflow is `blocked` (nondeterminism, a corrupt history): it waits for
    /// fixed code; the reason.
    Blocked(String),
    /// The user pressed Ctrl-C; the workflow goes on.
    Detached,
}

impl Followed {
    /// The progress of a workflow that ended. `None` when the user detached (a note
    /// names `resume`, the command that follows it again, unless `quiet`); an error when
    /// the workflow is blocked.
    pub fn ended(
        self,
        workflow_id: &str,
        resume: &str,
        quiet: bool,
    ) -> anyhow::Result<Option<Progress>> {
        match self {
            Followed::Ended(progress) => Ok(Some(progress)),
            Followed::Detached => {
                if !quiet {
                    println!("detached; {workflow_id} goes on: {resume}");
                }
                Ok(None)
            }
            Followed::Blocked(reason) => anyhow::bail!(
                "{workflow_id} is blocked and waits for fixed workflow code: {reason}"
            ),
        }
    }
}

/// Ok when the workflow completed; otherwise the error that says how it ended (a
/// non-zero exit for the command).
pub fn completed(progress: &Progress, workflow_id: &str) -> anyhow::Result<()> {
    match &progress.outcome {
        Some(outcome) if outcome.succeeded() => Ok(()),
        Some(outcome) => anyhow::bail!("{workflow_id} ended {}", outcome.status()),
        None => anyhow::bail!("{workflow_id} did not end"),
    }
}

/// Prints the workflow's steps (when `show`) until it ends, blocks or the user detaches.
pub async fn follow(api: &ApiClient, workflow_id: &str, show: bool) -> anyhow::Result<Followed> {
    // Subscribe before reading the history, so nothing falls between the two.
    let mut live = api
        .client
        .subscribe(api.subjects.events(workflow_id))
        .await?;
    let mut screen = Screen::new(show);
    let mut progress = Progress::new();
    let mut next = 1;
    catch_up(api, workflow_id, &mut next, &mut progress, &mut screen).await?;
    if progress.outcome.is_none() {
        let workflow = api.describe(workflow_id).await?;
        if workflow["status"] == "pending" {
            screen.line(&format!(
                "   waiting: another workflow of {} runs first",
                workflow["concurrency_key"]
                    .as_str()
                    .unwrap_or("this cluster")
            ));
        }
    }
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(TICK);
    let mut heard = Instant::now();
    while progress.outcome.is_none() {
        tokio::select! {
            biased;
            _ = &mut ctrl_c => {
                screen.clear();
                return Ok(Followed::Detached);
            }
            message = live.next() => {
                let Some(message) = message else {
                    anyhow::bail!("the NATS connection closed while following {workflow_id}");
                };
                heard = Instant::now();
                let Ok(entry) = serde_json::from_slice::<Value>(&message.payload) else { continue };
                let seq = entry["seq"].as_u64().unwrap_or_default();
                if seq < next {
                    continue;
                }
                if seq == next {
                    screen.lines(&progress.apply(&entry));
                    next += 1;
                } else {
                    catch_up(api, workflow_id, &mut next, &mut progress, &mut screen).await?;
                }
            }
            _ = tick.tick() => {
                screen.spin(&progress);
                if heard.elapsed() >= QUIET {
                    heard = Instant::now();
                    let before = next;
                    catch_up(api, workflow_id, &mut next, &mut progress, &mut screen).await?;
                    if next == before {
                        let workflow = api.describe(workflow_id).await?;
                        if workflow["status"] == "blocked" {
                            screen.clear();
                            let reason = workflow["error"]["message"].as_str().unwrap_or("blocked").to_owned();
                            return Ok(Followed::Blocked(reason));
                        }
                    }
                }
            }
        }
    }
    screen.clear();
    Ok(Followed::Ended(progress))
}

/// Applies every recorded event from `next` on.
async fn catch_up(
    api: &ApiClient,
    workflow_id: &str,
    next: &mut u64,
    progress: &mut Progress,
    screen: &mut Screen,
) -> anyhow::Result<()> {
    for entry in api.history_from(workflow_id, *next).await? {
        let seq = entry["seq"].as_u64().unwrap_or_default();
        if seq != *next {
            continue;
        }
        screen.lines(&progress.apply(&entry));
        *next += 1;
    }
    Ok(())
}

/// Lines on stdout; on a terminal, a spinner line on stderr below them naming what runs.
struct Screen {
    show: bool,
    spinner: bool,
    turns: usize,
    drawn: bool,
}

impl Screen {
    fn new(show: bool) -> Self {
        Self {
            show,
            spinner: show && std::io::stderr().is_terminal(),
            turns: 0,
            drawn: false,
        }
    }

    fn line(&mut self, line: &str) {
        self.lines(std::slice::from_ref(&line.to_owned()));
    }

    fn lines(&mut self, lines: &[String]) {
        if !self.show || lines.is_empty() {
            return;
        }
        self.clear();
        let mut out = std::io::stdout().lock();
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }

    fn spin(&mut self, progress: &Progress) {
        if !self.spinner {
            return;
        }
        self.turns += 1;
        let running = progress.running();
        let what = match running.as_slice() {
            [] => "waiting".to_owned(),
            [one] => (*one).to_owned(),
            [first, rest @ ..] => format!("{first} (+{} more)", rest.len()),
        };
        let elapsed = progress
            .started_at()
            .map(|start| seconds(chrono::Utc::now() - start))
            .unwrap_or_default();
        let width = terminal_width().saturating_sub(2);
        let mut text = format!("{} {elapsed}  {what}", SPINNER[self.turns % SPINNER.len()]);
        if text.chars().count() > width {
            text = text
                .chars()
                .take(width.saturating_sub(1))
                .collect::<String>()
                + "…";
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// `$COLUMNS`, or 100.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}
