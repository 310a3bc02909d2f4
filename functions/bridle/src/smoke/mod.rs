//! `bridle smoke`: a live check to run after changing the prompt, the tools or the model. Not a
//! test suite — a smoke alarm. It holds one realistic conversation ([`script::CONVERSATION`])
//! with whatever model is configured, through the same job path and engine as `bridle serve`,
//! on a throwaway in-memory store, and prints each reply, every tool call and its result, and
//! the tokens, cost and latency of each turn.
//!
//! It fails (exit 1) on what the harness must get right whatever the model says: a turn that
//! did not run, a model call that failed, an empty reply, a reply that differs from what was
//! recorded as seen, a risky change that ran without a yes. The model's wording, and whether it
//! chose the expected tools, are printed for a human to judge, never failed on.

mod report;
pub mod script;

use crate::config::{BackendChoice, ConfigErrors, ServeConfig};
use crate::{AppOptions, Db, StartError, build_app};
use backend::ChatModel;
use channel_jobs::web::WEB_CHANNEL;
use engine::{CollectSink, TurnEnd, TurnEvent};
use queue::TurnJob;
use script::{CONVERSATION, RISKY_STEP, Said, UNDO_STEP};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use transcript::{Conversation, ConversationId, Message};

/// What `bridle smoke` runs against.
#[derive(Debug, Clone)]
pub struct SmokeConfig {
    /// The configured backend (never [`BackendChoice::None`]), or `None` for the built-in
    /// script (`BRIDLE_BACKEND=scripted` without `BRIDLE_SCRIPT`).
    pub backend: Option<BackendChoice>,
    pub serve: ServeConfig,
}

impl SmokeConfig {
    /// The model and its settings as `bridle serve` reads them; the server's own settings
    /// (address, sign-in) do not apply.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigErrors> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let built_in = set("BRIDLE_BACKEND")
            .is_some_and(|b| b.trim().eq_ignore_ascii_case("scripted"))
            && set("BRIDLE_SCRIPT").is_none();
        let serve = ServeConfig::from_vars(|k| match k {
            "BRIDLE_ADDR" | "BRIDLE_OIDC_ISSUER" => None,
            "BRIDLE_BACKEND" if built_in => Some("none".into()),
            _ => var(k),
        })?;
        let backend = match &serve.backend {
            BackendChoice::None if built_in => None,
            BackendChoice::None => {
                return Err(ConfigErrors(vec![
                    "bridle smoke needs a model: set OPENAI_BASE_URL and OPENAI_MODEL, or \
                     BEDROCK_MODEL_ID, or BRIDLE_BACKEND=scripted (the built-in script, or \
                     BRIDLE_SCRIPT)"
                        .into(),
                ]));
            }
            other => Some(other.clone()),
        };
        Ok(Self { backend, serve })
    }
}

/// What went wrong in the harness, one sentence each; empty when the smoke run passed.
#[derive(Debug, Default)]
pub struct Findings {
    pub failures: Vec<String>,
}

/// Hold the conversation with `model` and print it to `out`.
pub async fn run(
    model: Arc<dyn ChatModel>,
    model_id: &str,
    config: &SmokeConfig,
    out: &mut dyn Write,
) -> Result<Findings, StartError> {
    let serve = &config.serve;
    let options = AppOptions {
        db: Db::Memory,
        model_id: model_id.to_owned(),
        engine: serve.model.applied_to(engine::EngineOptions {
            system_prompt: serve.prompt.text.clone(),
            prompt_version: serve.prompt.version.clone(),
            ..engine::EngineOptions::default()
        }),
        guards: crate::guards::GuardOptions {
            budget: Arc::new(serve.budget.clone()),
            confirmation: serve.confirmation.clone(),
            ..crate::guards::GuardOptions::default()
        },
        ..AppOptions::default()
    };
    let app = build_app(model.clone(), options)?;
    // The server's job path, without its metric lines (they would interleave the printout).
    let served = &app.channels.jobs;
    let jobs = channel_jobs::ChannelJobs {
        engine: served.engine.clone(),
        store: served.store.clone(),
        senders: served.senders.clone(),
        options: channel_jobs::JobOptions {
            metrics: metrics::Metrics::off(),
            ..served.options.clone()
        },
    };
    let conv = Conversation::new(
        "smoke",
        crate::server::LOCAL_USER,
        WEB_CHANNEL,
        assembly::CHAT_PURPOSE,
    );
    app.store.create_conversation(&conv).await?;
    let mut printer = report::Printer::new(out, &serve.budget, model_id);
    printer.opening(model.name(), &serve.model);

    let mut findings = Findings::default();
    let mut seen_position = None;
    let mut yes_button: Option<(String, String)> = None;
    for (n, step) in CONVERSATION.iter().enumerate() {
        let (text, button_id) = match (step.said, yes_button.take()) {
            (Said::PressesYes(_), Some((id, title))) => (title, Some(id)),
            (Said::PressesYes(words) | Said::Types(words), _) => (words.to_owned(), None),
        };
        let job = TurnJob {
            addressed_to: None,
            trace_context: Default::default(),
            channel: WEB_CHANNEL.into(),
            message_id: format!("smoke.{}", n + 1),
            conversation_key: conv.id.0.clone(),
            external_user_id: crate::server::LOCAL_USER.into(),
            text: text.clone(),
            button_id: button_id.clone(),
            media: Vec::new(),
            received_at_ms: 0,
        };
        printer.user(n + 1, step.about, &text, button_id.is_some());
        let published = if n == RISKY_STEP {
            published_events(app.store.as_ref()).await?
        } else {
            Vec::new()
        };
        let sink = CollectSink::default();
        let started = Instant::now();
        let ran = jobs
            .run_streamed(&job, Duration::from_secs(900), &sink)
            .await;
        let latency = started.elapsed();
        let rows = new_rows(app.store.as_ref(), &conv.id, &mut seen_position).await?;
        printer.tool_calls(&rows);
        let Some(outcome) = ran.turn else {
            let why = format!("turn {}: the turn did not run ({:?})", n + 1, ran.outcome);
            printer.failure(&why);
            findings.failures.push(why);
            continue;
        };
        printer.reply(&outcome, latency);
        let mut fail = |why: String| {
            findings.failures.push(format!("turn {}: {why}", n + 1));
        };
        if outcome.end == TurnEnd::BackendFailed {
            fail(format!("the model call failed: {:?}", outcome.reply));
        }
        if let Some(TurnEvent::Error { message }) = sink
            .events()
            .iter()
            .find(|e| matches!(e, TurnEvent::Error { .. }))
            && outcome.end != TurnEnd::BackendFailed
        {
            fail(format!("the turn reported an error: {message:?}"));
        }
        if outcome.reply.trim().is_empty() && !outcome.silent {
            fail("the user got no reply".into());
        }
        let visible = app.store.visible(&conv.id).await?;
        match visible.last() {
            Some(last) if outcome.silent || last.text == outcome.reply => {}
            last => fail(format!(
                "what was recorded as seen ({:?}) is not the reply ({:?})",
                last.map(|l| &l.text),
                outcome.reply
            )),
        }
        if button_id.is_some() && !press_ran(&rows) {
            fail("the Yes press ran nothing of what was held".into());
        }
        if n == RISKY_STEP {
            match risky_call_ran(&rows, &published) {
                Some(tool) => fail(format!("the risky {tool} ran without the user's yes")),
                None if outcome.buttons.is_empty() => printer.note(
                    "nothing was held for confirmation (the model did not ask for the risky \
                     change); the next message is typed instead of pressed",
                ),
                None => {}
            }
        }
        // The held cancellation's Yes, and the held undo's: the next message presses it
        // (otherwise it types its words). Nothing else a model held is pressed.
        let held_undo = rows
            .iter()
            .flat_map(|m| &m.parts)
            .any(|p| matches!(p, transcript::Part::ToolUse { name, .. } if name == "undo"));
        if n == RISKY_STEP || (n == UNDO_STEP && held_undo) {
            yes_button = outcome
                .buttons
                .iter()
                .find(|b| b.id.ends_with(":yes"))
                .map(|b| (b.id.clone(), b.title.clone()));
        }
        for failure in findings
            .failures
            .iter()
            .filter(|f| f.starts_with(&format!("turn {}:", n + 1)))
        {
            printer.failure(failure);
        }
    }
    printer.summary(&findings.failures);
    Ok(findings)
}

/// The transcript rows written since the last call (the turn's), in order.
async fn new_rows(
    store: &dyn store::Store,
    conv: &ConversationId,
    seen: &mut Option<u64>,
) -> Result<Vec<Message>, store::StoreError> {
    let segment = store.conversation(conv).await?.map_or(0, |c| c.segment);
    let rows: Vec<Message> = store
        .messages(conv, segment)
        .await?
        .into_iter()
        .filter(|m| seen.is_none_or(|s| m.position > s))
        .collect();
    if let Some(last) = rows.last() {
        *seen = Some(last.position);
    }
    Ok(rows)
}

/// Whether the turn's user message carries the harness's note that a press ran the held calls.
fn press_ran(rows: &[Message]) -> bool {
    rows.iter().flat_map(|m| &m.parts).any(
        |p| matches!(p, transcript::Part::Text { text } if text.contains("so the harness ran it")),
    )
}

/// The ids of the user's published events (what a cancel would need a yes for).
async fn published_events(store: &dyn store::Store) -> Result<Vec<String>, store::StoreError> {
    let user = crate::server::LOCAL_USER.into();
    Ok(store
        .records_of(&user, planner::EVENT)
        .await?
        .into_iter()
        .filter(|r| r.value.get("status").and_then(|s| s.as_str()) == Some("published"))
        .map(|r| r.id)
        .collect())
}

/// A cancel of an event that was published before the turn, which ran instead of being held:
/// its result is neither held (`NOT EXECUTED`) nor an error.
fn risky_call_ran(rows: &[Message], published: &[String]) -> Option<String> {
    use transcript::Part;
    let parts = || rows.iter().flat_map(|m| &m.parts);
    let cancels: Vec<&str> = parts()
        .filter_map(|p| match p {
            Part::ToolUse { id, name, input } if name == "cancel_event" => input
                .get("event_id")
                .and_then(|e| e.as_str())
                .filter(|e| published.iter().any(|p| p == e))
                .map(|_| id.as_str()),
            _ => None,
        })
        .collect();
    parts().find_map(|p| match p {
        Part::ToolResult {
            tool_use_id,
            content,
            is_error: false,
        } if cancels.contains(&tool_use_id.as_str())
            && !content.to_string().contains("NOT EXECUTED") =>
        {
            Some("cancel_event".to_owned())
        }
        _ => None,
    })
}
