//! Risky calls over MCP. There is no later human turn, so a call the confirmation policy calls
//! risky asks the human through the client (elicitation) and runs only on an explicit accept.
//!
//! Stateless, as Lambda needs: the question is an MCP `InputRequiredResult` (protocol
//! 2026-07-28: the client asks its human, then sends the same `tools/call` again with the
//! answer and the echoed `requestState`). What was asked is a pending confirmation in the
//! store (`store::Confirmations`, conversation `mcp:<token id>`, keyed by the call's hash,
//! with the description built from the database), taken once when the answer comes: an
//! answer for another call, a second answer, one after the record expired, or one to a
//! description that no longer holds runs nothing. A client that cannot be asked (no
//! elicitation capability, or an older protocol) is refused with a sentence. Never silently.

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, RequestMetaObject};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use store::{Confirmations, Pending};
use tools::{Ctx, ToolCall};

/// The key of the question in an input-required round.
pub const CONFIRM_KEY: &str = "confirm";
/// How long a question put to the human stays answerable.
pub const ASK_TTL_MS: i64 = 10 * 60_000;

/// What to do with a risky call.
#[derive(Debug)]
pub enum Decision {
    /// The human said yes to exactly this call: run it.
    Run,
    /// Ask the human first (answer the client with this).
    Ask(InputRequiredResult),
    /// Do not run it; say this.
    Refuse(String),
}

/// Whether the request's client can be asked: protocol 2026-07-28 or later (input-required
/// rounds) and an elicitation capability.
pub fn can_ask(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|v| v.as_str() >= "2026-07-28")
        && meta
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some())
}

/// The question: a yes/no form with the server-built description.
pub fn question(description: &str, state: &str) -> Result<InputRequiredResult, serde_json::Error> {
    let request: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": format!("Bridle needs your yes to: {description}. Do it?"),
            "requestedSchema": {"type": "object", "properties": {}},
        }
    }))?;
    let requests: InputRequests = BTreeMap::from([(CONFIRM_KEY.to_owned(), request)]);
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(state.to_owned()),
    ))
}

/// What the human answered, from the round's responses: `Some(true)` only for `accept`.
pub fn accepted(responses: &BTreeMap<String, Value>) -> Option<bool> {
    let action = responses.get(CONFIRM_KEY)?.get("action")?.as_str()?;
    Some(action == "accept")
}

/// The answers of a round, when this request carries one.
#[derive(Debug)]
pub struct Round<'a> {
    pub responses: Option<&'a BTreeMap<String, Value>>,
    pub state: Option<&'a str>,
    pub can_ask: bool,
}

/// Decide a risky call described as `description` (from the database, now).
pub async fn decide(
    pending: &dyn Confirmations,
    ctx: &Ctx,
    call: &ToolCall,
    description: &str,
    round: Round<'_>,
    now_ms: i64,
) -> Decision {
    let hash = engine::call_hash(&call.name, &call.input);
    let conversation = &ctx.conversation_id;
    if let (Some(responses), Some(state)) = (round.responses, round.state) {
        if state != hash {
            return Decision::Refuse(
                "That answer was for another call, so nothing was done. Call the tool again to \
                 be asked about this one."
                    .into(),
            );
        }
        let taken = match pending
            .take_pending(conversation, &hash, &ctx.action_id.0, now_ms)
            .await
        {
            Ok(taken) => taken,
            Err(err) => {
                tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "taking an MCP confirmation failed");
                return Decision::Refuse(
                    "Bridle could not check the answer just now, so nothing was done. Try again \
                     in a moment."
                        .into(),
                );
            }
        };
        let Some(taken) = taken else {
            return Decision::Refuse(
                "That question was already answered or has expired, so nothing was done. Call \
                 the tool again to be asked again."
                    .into(),
            );
        };
        if taken.description != description {
            return Decision::Refuse(format!(
                "What the call would do has changed since the question (now: {description}), \
                 so nothing was done. Call it again to be asked about that."
            ));
        }
        return match accepted(responses) {
            Some(true) => Decision::Run,
            _ => Decision::Refuse(format!(
                "Not done: the person did not agree to “{description}”."
            )),
        };
    }
    if !round.can_ask {
        return Decision::Refuse(format!(
            "“{description}” needs a person's yes, and this client cannot ask for one (it does \
             not support elicitation), so nothing was done. Ask in the Bridle chat instead, \
             where you will be asked to confirm."
        ));
    }
    let record = Pending {
        conversation: conversation.clone(),
        hash: hash.clone(),
        created_on_action: ctx.action_id.0.clone(),
        description: description.to_owned(),
        expires_at_ms: now_ms + ASK_TTL_MS,
    };
    if let Err(err) = pending.put_pending(&record).await {
        tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "storing an MCP confirmation failed");
        return Decision::Refuse(
            "Bridle could not ask for a yes just now, so nothing was done. Try again in a moment."
                .into(),
        );
    }
    match question(description, &hash) {
        Ok(ask) => Decision::Ask(ask),
        Err(err) => {
            tracing::error!(error = %err, "building an elicitation failed");
            Decision::Refuse("Internal error; nothing was done.".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_is_a_form_with_the_description() {
        let ask = question("Cancel Spring Open", "h1").unwrap();
        let wire = serde_json::to_value(&ask).unwrap();
        assert_eq!(wire["resultType"], "input_required", "{wire}");
        assert_eq!(wire["requestState"], "h1");
        let asked = &wire["inputRequests"][CONFIRM_KEY];
        assert_eq!(asked["method"], "elicitation/create", "{wire}");
        assert!(
            asked["params"]["message"]
                .as_str()
                .unwrap()
                .contains("Cancel Spring Open")
        );
    }

    #[test]
    fn only_accept_is_a_yes() {
        let answer = |v: Value| BTreeMap::from([(CONFIRM_KEY.to_owned(), v)]);
        assert_eq!(accepted(&answer(json!({"action": "accept"}))), Some(true));
        assert_eq!(accepted(&answer(json!({"action": "decline"}))), Some(false));
        assert_eq!(accepted(&answer(json!({"action": "cancel"}))), Some(false));
        assert_eq!(accepted(&BTreeMap::new()), None);
    }
}
