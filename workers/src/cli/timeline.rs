//! A workflow's timeline for an audit: one row per step (activity), from scheduled to
//! its last outcome, with its failed attempts and whether it was a compensation; as
//! terminal text, or a self-contained HTML page with a Gantt chart. Pure.

use std::collections::BTreeMap;

use hcpflow_engine::{Event, HistoryEvent};

use crate::cli::progress::step_label;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed(String),
    Running,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub seq: u64,
    pub label: String,
    pub compensation: bool,
    /// Milliseconds from the workflow's start.
    pub start_ms: u64,
    pub end_ms: u64,
    /// When each failed attempt ended, and why.
    pub failed_attempts: Vec<(u64, String)>,
    pub resources: Vec<String>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub workflow_id: String,
    pub workflow_type: String,
    pub status: String,
    pub total_ms: u64,
    pub rows: Vec<Row>,
    /// Milliseconds from the start when the rollback began, and why.
    pub rollback: Option<(u64, String)>,
}

impl Timeline {
    pub fn build(workflow_id: &str, history: &[HistoryEvent]) -> Self {
        let start = history
            .first()
            .map(|e| e.recorded_at.as_millis())
            .unwrap_or_default();
        let at = |e: &HistoryEvent| e.recorded_at.as_millis().saturating_sub(start);
        let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
        let mut workflow_type = String::new();
        let mut rollback = None;
        for event in history {
            match &event.event {
                Event::WorkflowStarted(started) => workflow_type = started.workflow_type.clone(),
                Event::ActivityScheduled(s) => {
                    rows.insert(
                        event.seq.get(),
                        Row {
                            seq: event.seq.get(),
                            label: step_label(&s.activity_type, &s.input),
                            compensation: s.compensation_of.is_some(),
                            start_ms: at(event),
                            end_ms: at(event),
                            failed_attempts: Vec::new(),
                            resources: Vec::new(),
                            outcome: Outcome::Running,
                        },
                    );
                }
                Event::ActivityCompleted(done) => {
                    if let Some(row) = rows.get_mut(&done.scheduled_seq.get()) {
                        row.end_ms = at(event);
                        row.outcome = Outcome::Done;
                    }
                }
                Event::ActivityFailed(failed) => {
                    if let Some(row) = rows.get_mut(&failed.scheduled_seq.get()) {
                        row.end_ms = at(event);
                        row.failed_attempts
                            .push((at(event), failed.failure.to_string()));
                        if failed.retry_at.is_none() {
                            row.outcome = Outcome::Failed(failed.failure.to_string());
                        }
                    }
                }
                Event::ResourceCreated(r) => {
                    if let Some(row) = rows.get_mut(&r.activity_seq.get()) {
                        row.resources.push(format!("+{}", r.resource.id));
                    }
                }
                Event::ResourceDeleted(r) => {
                    if let Some(row) = rows.get_mut(&r.activity_seq.get()) {
                        row.resources.push(format!("-{}", r.resource.id));
                    }
                }
                Event::ResourceObserved(r) => {
                    if let Some(row) = rows.get_mut(&r.activity_seq.get()) {
                        row.resources
                            .push(format!("={} ({})", r.resource.id, r.owner));
                    }
                }
                Event::RollbackStarted(r) => rollback = Some((at(event), r.cause.to_string())),
                _ => {}
            }
        }
        let total_ms = history.last().map(at).unwrap_or_default().max(1);
        for row in rows.values_mut() {
            if row.outcome == Outcome::Running {
                row.end_ms = total_ms;
            }
        }
        Timeline {
            workflow_id: workflow_id.to_owned(),
            workflow_type,
            status: hcpflow_engine::history::status(history).as_str().to_owned(),
            total_ms,
            rows: rows.into_values().collect(),
            rollback,
        }
    }

    /// One line per step: offset, duration, a bar on a `width`-column scale, marks.
    pub fn text(&self, width: usize) -> String {
        let mut out = format!(
            "{} {} {} — {} steps in {}\n",
            self.workflow_id,
            self.workflow_type,
            self.status,
            self.rows.len(),
            seconds(self.total_ms)
        );
        let label_width = self
            .rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0)
            .min(60);
        let mut rollback_shown = false;
        for row in &self.rows {
            if let Some((at, cause)) = &self.rollback {
                if !rollback_shown && row.start_ms >= *at && row.compensation {
                    out.push_str(&format!("{:>8}  ⟲ rollback: {cause}\n", seconds(*at)));
                    rollback_shown = true;
                }
            }
            let scale = |ms: u64| (ms as usize * width) / self.total_ms.max(1) as usize;
            let (from, to) = (
                scale(row.start_ms),
                scale(row.end_ms).max(scale(row.start_ms) + 1),
            );
            let fill = if row.compensation { '▒' } else { '█' };
            let mut bar: Vec<char> = (0..width.max(1))
                .map(|i| if i >= from && i < to { fill } else { '·' })
                .collect();
            for (ms, _) in &row.failed_attempts {
                let i = scale(*ms).min(bar.len() - 1);
                bar[i] = '×';
            }
            let mark = match (&row.outcome, row.compensation) {
                (Outcome::Failed(_), _) => "✗",
                (Outcome::Running, _) => "…",
                (Outcome::Done, true) => "↶",
                (Outcome::Done, false) => "✓",
            };
            let label: String = row.label.chars().take(label_width).collect();
            let retries = match row.failed_attempts.len() {
                0 => String::new(),
                n => format!(" ({n} failed attempt{})", if n == 1 { "" } else { "s" }),
            };
            out.push_str(&format!(
                "{:>8} {:>8}  {mark} {label:<label_width$}  {}{retries}\n",
                seconds(row.start_ms),
                seconds(row.end_ms - row.start_ms),
                bar.into_iter().collect::<String>()
            ));
        }
        out
    }

    /// A self-contained HTML page: a Gantt chart of the steps, retries and compensations.
    pub fn html(&self) -> String {
        let pct = |ms: u64| ms as f64 * 100.0 / self.total_ms.max(1) as f64;
        let mut rows = String::new();
        for row in &self.rows {
            let class = match (&row.outcome, row.compensation) {
                (Outcome::Failed(_), _) => "failed",
                (Outcome::Running, _) => "running",
                (Outcome::Done, true) => "compensation",
                (Outcome::Done, false) => "done",
            };
            let width = (pct(row.end_ms) - pct(row.start_ms)).max(0.3);
            let mut marks = String::new();
            for (ms, reason) in &row.failed_attempts {
                marks.push_str(&format!(
                    r#"<span class="retry" style="left:{:.3}%" title="{}"></span>"#,
                    pct(*ms),
                    escape(reason)
                ));
            }
            let title = format!(
                "seq {} · {} → {} ({}){}{}",
                row.seq,
                seconds(row.start_ms),
                seconds(row.end_ms),
                seconds(row.end_ms - row.start_ms),
                if row.resources.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", row.resources.join(" "))
                },
                match &row.outcome {
                    Outcome::Failed(reason) => format!(" · failed: {reason}"),
                    _ => String::new(),
                }
            );
            rows.push_str(&format!(
                r#"<div class="row"><div class="label" title="{title}">{}</div><div class="track"><span class="bar {class}" style="left:{:.3}%;width:{width:.3}%" title="{title}"></span>{marks}</div></div>
"#,
                escape(&row.label),
                pct(row.start_ms),
                title = escape(&title),
            ));
        }
        let rollback = match &self.rollback {
            Some((at, cause)) => format!(
                r#"<div class="rollback" style="left:calc(22em + (100% - 22em) * {:.5})" title="{}"></div>"#,
                pct(*at) / 100.0,
                escape(&format!("rollback at {}: {cause}", seconds(*at)))
            ),
            None => String::new(),
        };
        format!(
            r#"<!doctype html>
<html><head><meta charset="utf-8"><title>{id} — hcpflow timeline</title>
<style>
body {{ font: 13px system-ui, sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.2em; }}
.chart {{ position: relative; }}
.row {{ display: flex; align-items: center; height: 18px; }}
.row:nth-child(even) {{ background: #f6f6f6; }}
.label {{ width: 22em; flex: none; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; font-family: monospace; font-size: 11px; }}
.track {{ position: relative; flex: 1; height: 12px; }}
.bar {{ position: absolute; top: 0; height: 12px; border-radius: 2px; }}
.done {{ background: #3c8d40; }} .compensation {{ background: #7b4fa8; }}
.failed {{ background: #c62828; }} .running {{ background: #9e9e9e; }}
.retry {{ position: absolute; top: -2px; width: 3px; height: 16px; background: #ef8f00; }}
.rollback {{ position: absolute; top: 0; bottom: 0; width: 2px; background: #c62828; }}
.legend span {{ display: inline-block; width: 1em; height: 1em; margin: 0 .3em 0 1em; vertical-align: middle; }}
</style></head><body>
<h1>{id} · {kind} · {status} · {steps} steps in {total}</h1>
<p class="legend"><span class="done"></span>step<span class="compensation"></span>compensation<span class="failed"></span>failed<span class="retry" style="position:static;display:inline-block"></span>failed attempt (retried)</p>
<div class="chart">
{rows}{rollback}</div>
<p>Hover a bar for its seq, times, the AWS and Kubernetes ids it recorded, and failures.</p>
</body></html>
"#,
            id = escape(&self.workflow_id),
            kind = escape(&self.workflow_type),
            status = escape(&self.status),
            steps = self.rows.len(),
            total = seconds(self.total_ms),
        )
    }
}

fn seconds(ms: u64) -> String {
    crate::cli::progress::seconds(chrono::Duration::milliseconds(
        i64::try_from(ms).unwrap_or(i64::MAX),
    ))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
