//! Following one workflow live: its history so far from the API, then its events as
//! they are published on `<prefix>.events.<id>`, drawn by [`Progress`] with an
//! indicatif spinner line on a terminal.
//!
//! Postgres is the truth: a gap in the live events (a message missed, a relay that
//! publishes late) is filled from the history API, and a quiet stream is re-checked
//! every few seconds, so the display never waits on a message that will not come.

use std::io::Write;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hcpflow_engine::{Seq, WorkflowId, WorkflowStatus};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::progress::{seconds, Progress};
use hcpflow_protocol::{ApiClient, HistoryEntry};

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(120);
/// How long without a live event before the history is read again.
const QUIET: Duration = Duration::from_secs(3);

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
pub async fn follow(
    api: &ApiClient,
    workflow_id: &WorkflowId,
    show: bool,
) -> anyhow::Result<Followed> {
    // Subscribe before reading the history, so nothing falls between the two.
    let mut live = api
        .client
        .subscribe(api.subjects.events(&api.tenant, workflow_id.as_str()))
        .await?;
    let screen = Screen::new(show);
    let mut follower = Follower {
        api,
        workflow_id,
        progress: Progress::new(),
        next: Seq::FIRST,
        screen: &screen,
    };
    follower.catch_up().await?;
    if follower.progress.outcome.is_none() {
        let workflow = api.describe(workflow_id).await?;
        if workflow.status == WorkflowStatus::Pending {
            screen.line(&format!(
                "   waiting: another workflow of {} runs first",
                workflow
                    .concurrency_key
                    .as_deref()
                    .unwrap_or("this cluster")
            ));
        }
    }
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(TICK);
    let mut heard = Instant::now();
    while follower.progress.outcome.is_none() {
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
                // An entry that does not decode is read again from the history.
                let entry = serde_json::from_slice::<HistoryEntry>(&message.payload).ok();
                follower.live(entry).await?;
            }
            _ = tick.tick() => {
                screen.spin(&follower.progress);
                if heard.elapsed() >= QUIET {
                    heard = Instant::now();
                    if let Some(reason) = follower.blocked_while_quiet().await? {
                        screen.clear();
                        return Ok(Followed::Blocked(reason));
                    }
                }
            }
        }
    }
    screen.clear();
    Ok(Followed::Ended(follower.progress))
}

/// One workflow's display, fed in seq order from the live stream and the history.
struct Follower<'a> {
    api: &'a ApiClient,
    workflow_id: &'a WorkflowId,
    progress: Progress,
    /// The seq of the next entry to show.
    next: Seq,
    screen: &'a Screen,
}

impl Follower<'_> {
    /// Shows a live entry in its turn; a gap (or an entry that did not decode) is
    /// filled from the history.
    async fn live(&mut self, entry: Option<HistoryEntry>) -> anyhow::Result<()> {
        match entry {
            Some(entry) if entry.seq < self.next => Ok(()),
            Some(entry) if entry.seq == self.next => {
                self.show(&entry);
                Ok(())
            }
            _ => self.catch_up().await,
        }
    }

    /// Shows every recorded entry from `next` on.
    async fn catch_up(&mut self) -> anyhow::Result<()> {
        for entry in self.api.history_from(self.workflow_id, self.next).await? {
            if entry.seq == self.next {
                self.show(&entry);
            }
        }
        Ok(())
    }

    fn show(&mut self, entry: &HistoryEntry) {
        self.screen.lines(&self.progress.apply(entry));
        self.next = self.next.next();
    }

    /// After a quiet spell: catches up, and if nothing new was recorded, whether the
    /// workflow is blocked (and why).
    async fn blocked_while_quiet(&mut self) -> anyhow::Result<Option<String>> {
        let before = self.next;
        self.catch_up().await?;
        if self.next != before {
            return Ok(None);
        }
        let workflow = self.api.describe(self.workflow_id).await?;
        Ok((workflow.status == WorkflowStatus::Blocked)
            .then(|| workflow.error_message().unwrap_or("blocked").to_owned()))
    }
}

/// Lines on stdout; on a terminal, a spinner line on stderr below them naming what runs.
struct Screen {
    show: bool,
    spinner: ProgressBar,
}

impl Screen {
    fn new(show: bool) -> Self {
        let spinner = if show {
            // indicatif draws nothing when stderr is not a terminal.
            ProgressBar::new_spinner()
        } else {
            ProgressBar::hidden()
        };
        spinner.set_style(
            ProgressStyle::with_template("{spinner} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        Self { show, spinner }
    }

    fn line(&self, line: &str) {
        self.lines(std::slice::from_ref(&line.to_owned()));
    }

    fn lines(&self, lines: &[String]) {
        if !self.show || lines.is_empty() {
            return;
        }
        self.spinner.suspend(|| {
            let mut out = std::io::stdout().lock();
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        });
    }

    /// Turns the spinner and names the steps running, with the time since the start.
    fn spin(&self, progress: &Progress) {
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
        self.spinner.set_message(format!("{elapsed}  {what}"));
        self.spinner.tick();
    }

    fn clear(&self) {
        self.spinner.finish_and_clear();
    }
}
