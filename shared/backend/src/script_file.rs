//! Scripts as files, so the local server and end-to-end tests can run the scripted model
//! (`BRIDLE_BACKEND=scripted`, `BRIDLE_SCRIPT=path`) with no network.
//!
//! ```json
//! { "repeat": true,
//!   "replies": [
//!     { "token_delay_ms": 30,
//!       "steps": [ {"say": "Let me check."},
//!                  {"call": {"name": "list_notes", "input": {}}},
//!                  {"stop": "tool_use"} ] },
//!     { "steps": [ {"say": "You have no notes yet."}, {"stop": "end_turn"} ] }
//!   ] }
//! ```
//!
//! Steps: `say` (text, streamed word by word), `reason` + optional `signature`, `call` (`id`
//! optional), `stop` (a stop reason name), `fail` (`throttled`, `overloaded`, `timeout`,
//! `transport`, `invalid_request`), `stall`, `wait_ms`. A reply may instead be
//! `{"error": "<kind>"}`: the call fails before streaming.

use crate::{BackendError, Reply, ScriptedModel};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;
use transcript::StopReason;

/// Why a script file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("the script is not valid JSON of the expected shape: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("reply {reply}: {problem}")]
    Invalid { reply: usize, problem: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    repeat: bool,
    replies: Vec<ReplySpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplySpec {
    #[serde(default)]
    token_delay_ms: u64,
    #[serde(default)]
    steps: Vec<StepSpec>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum StepSpec {
    Say(String),
    Reason(String),
    Signature(String),
    Call(CallSpec),
    Stop(String),
    Fail(String),
    Stall(bool),
    WaitMs(u64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallSpec {
    id: Option<String>,
    name: String,
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ScriptedModel {
    /// A scripted model from a script file's text (see the module docs for the format).
    pub fn from_script(json: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = serde_json::from_str(json)?;
        let replies = file
            .replies
            .into_iter()
            .enumerate()
            .map(|(i, spec)| build(i + 1, spec))
            .collect::<Result<Vec<_>, _>>()?;
        if replies.is_empty() {
            return Err(ScriptError::Invalid {
                reply: 0,
                problem: "the script has no replies".into(),
            });
        }
        Ok(if file.repeat {
            ScriptedModel::repeating(replies)
        } else {
            ScriptedModel::new(replies)
        })
    }
}

fn build(n: usize, spec: ReplySpec) -> Result<Reply, ScriptError> {
    let invalid = |problem: String| ScriptError::Invalid { reply: n, problem };
    if let Some(kind) = spec.error {
        return error_of(&kind).map(Reply::error).map_err(invalid);
    }
    let delay = Duration::from_millis(spec.token_delay_ms);
    let mut reply = Reply::new();
    let mut pending_reason: Option<String> = None;
    for (j, step) in spec.steps.into_iter().enumerate() {
        if let Some(text) = pending_reason.take() {
            let sig = match &step {
                StepSpec::Signature(s) => s.clone(),
                _ => String::new(),
            };
            reply = reply.reason(&text, &sig);
            if matches!(step, StepSpec::Signature(_)) {
                continue;
            }
        }
        reply = match step {
            StepSpec::Say(text) if delay.is_zero() => reply.say(&text),
            StepSpec::Say(text) => {
                for word in text.split_inclusive(' ') {
                    reply = reply.say(word).then_wait(delay);
                }
                reply
            }
            StepSpec::Reason(text) => {
                pending_reason = Some(text);
                reply
            }
            StepSpec::Signature(_) => {
                return Err(invalid("`signature` must follow `reason`".into()));
            }
            StepSpec::Call(c) => {
                let id = c.id.unwrap_or_else(|| format!("call_{n}_{j}"));
                reply.call(&id, &c.name, c.input)
            }
            StepSpec::Stop(name) => reply.stop(StopReason::from_name(&name)),
            StepSpec::Fail(kind) => reply.then_fail(error_of(&kind).map_err(invalid)?),
            StepSpec::Stall(true) => reply.then_stall(),
            StepSpec::Stall(false) => reply,
            StepSpec::WaitMs(ms) => reply.then_wait(Duration::from_millis(ms)),
        };
    }
    if let Some(text) = pending_reason {
        reply = reply.reason(&text, "");
    }
    Ok(reply)
}

fn error_of(kind: &str) -> Result<BackendError, String> {
    Ok(match kind {
        "throttled" => BackendError::Throttled { retry_after: None },
        "overloaded" => BackendError::Overloaded,
        "timeout" => BackendError::Timeout {
            after: Duration::from_secs(60),
        },
        "transport" => BackendError::transport("scripted transport failure"),
        "invalid_request" => BackendError::InvalidRequest {
            message: "scripted invalid request".into(),
        },
        "context_too_long" => BackendError::ContextTooLong,
        other => return Err(format!("unknown error kind {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatModel, ChatRequest, ModelEvent};
    use futures::TryStreamExt;

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![],
            tools: Default::default(),
            settings: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_script_file_plays_and_repeats() {
        let model = ScriptedModel::from_script(
            r#"{"repeat": true, "replies": [
                {"steps": [{"reason": "hmm"}, {"signature": "s1"}, {"say": "Hi there"},
                           {"call": {"name": "list_notes"}}, {"stop": "tool_use"}]},
                {"steps": [{"say": "Done."}, {"stop": "end_turn"}]}
            ]}"#,
        )
        .unwrap();
        for _ in 0..2 {
            let events: Vec<ModelEvent> = model
                .stream(request())
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert!(matches!(&events[2], ModelEvent::Text { text } if text == "Hi "));
            assert!(matches!(&events[4], ModelEvent::ToolUse { id, name, .. }
                if id == "call_1_3" && name == "list_notes"));
            let events: Vec<ModelEvent> = model
                .stream(request())
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert!(matches!(
                events.last(),
                Some(ModelEvent::Done {
                    stop_reason: StopReason::EndTurn,
                    ..
                })
            ));
        }
    }

    #[test]
    fn bad_scripts_say_what_is_wrong() {
        let err = ScriptedModel::from_script(r#"{"replies": [{"steps": [{"fail": "nope"}]}]}"#)
            .unwrap_err();
        assert_eq!(err.to_string(), "reply 1: unknown error kind \"nope\"");
        assert!(matches!(
            ScriptedModel::from_script(r#"{"replies": [{"steps": [{"sing": "la"}]}]}"#),
            Err(ScriptError::Parse(_))
        ));
        assert!(ScriptedModel::from_script(r#"{"replies": []}"#).is_err());
    }
}
