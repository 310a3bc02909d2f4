//! Risky calls over MCP. There is no later human turn, and a client's own "yes" is only the
//! client's word: a script holding a token of the risky scope could answer its own question. So
//! a call the confirmation policy calls risky runs only once the token's owner has approved
//! exactly that call on Bridle's own page, signed in ([`crate::approval`], `/approve`).
//!
//! Stateless, as Lambda needs. The first call stores the question (`store::Confirmations`,
//! conversation `mcp:<token id>`, keyed by the call's hash, with the description built from the
//! database) and answers with the page's address: a URL-mode elicitation in an input-required
//! round (protocol 2026-07-28) when the client can open one, otherwise a tool result its model
//! reads and passes on. Approving turns the question into an approval (conversation
//! `mcp:<token id>:approved`, the same hash, [`APPROVAL_TTL_MS`]); the same call made again
//! takes it once and runs, provided the description still holds. Declined, expired, another
//! call's, already used, or only the client's accept: nothing runs. Never silently.
//!
//! Without sign-in (a local server on loopback) the page has no owner to check: anything on
//! the machine is the local user, a script holding a token included, so there the approval
//! is as strong as the machine's own accounts. `/connect` says so.

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, RequestMetaObject};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use store::{Confirmations, Pending};
use tools::{Ctx, ToolCall};
use transcript::ConversationId;

/// The key of the question in an input-required round.
pub const CONFIRM_KEY: &str = "confirm";
/// How long a question stays answerable on the page.
pub const ASK_TTL_MS: i64 = 10 * 60_000;
/// How long an approval waits for the call to be made again.
pub const APPROVAL_TTL_MS: i64 = 10 * 60_000;

/// The conversation of token `token_id`'s calls (their `Ctx`, their lease), where its
/// questions wait for the owner.
pub fn token_conversation(token_id: &str) -> ConversationId {
    format!("mcp:{token_id}").into()
}

/// Where the owner's approvals of a token's calls wait for the call.
pub fn approval_key(token_id: &str) -> ConversationId {
    format!("mcp:{token_id}:approved").into()
}

/// The page on which the owner answers the question of call `hash` of token `token_id`.
pub fn approve_url(base: &str, token_id: &str, hash: &str) -> String {
    format!(
        "{}/approve?token={token_id}&call={hash}",
        base.trim_end_matches('/')
    )
}

/// What to do with a risky call.
#[derive(Debug)]
pub enum Decision {
    /// The owner approved exactly this call on Bridle's page: run it.
    Run,
    /// Send the human to the page (answer the client with this).
    Ask(InputRequiredResult),
    /// Do not run it; say this.
    Refuse(String),
}

/// Whether the request's client can send its human to a page: protocol 2026-07-28 or later
/// (input-required rounds) and URL-mode elicitation.
pub fn can_open_url(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|v| v.as_str() >= "2026-07-28")
        && meta
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.url.is_some())
}

/// The question: a URL-mode elicitation sending the human to the page.
pub fn question(
    description: &str,
    url: &str,
    state: &str,
) -> Result<InputRequiredResult, serde_json::Error> {
    let request: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": format!(
                "Bridle needs your approval to: {description}. Open the page, signed in to \
                 Bridle, and approve or decline it there; once approved, ask for the change \
                 again (within 10 minutes)."
            ),
            "url": url,
            "elicitationId": state,
        }
    }))?;
    let requests: InputRequests = BTreeMap::from([(CONFIRM_KEY.to_owned(), request)]);
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(state.to_owned()),
    ))
}

/// What the client says its human did, from the round's responses: `Some(true)` only for
/// `accept` (in URL mode: agreed to open the page; it approves nothing).
pub fn accepted(responses: &BTreeMap<String, Value>) -> Option<bool> {
    let action = responses.get(CONFIRM_KEY)?.get("action")?.as_str()?;
    Some(action == "accept")
}

/// The answers of a round, when this request carries one.
#[derive(Debug)]
pub struct Round<'a> {
    pub responses: Option<&'a BTreeMap<String, Value>>,
    pub state: Option<&'a str>,
    pub can_open_url: bool,
}

/// One risky call of token `token_id`, described as `description` (from the database, now).
#[derive(Debug)]
pub struct RiskyCall<'a> {
    pub token_id: &'a str,
    pub call: &'a ToolCall,
    pub description: &'a str,
    /// Where the page is served (`https://…`, no trailing slash needed).
    pub base_url: &'a str,
}

/// Decide a risky call.
pub async fn decide(
    pending: &dyn Confirmations,
    ctx: &Ctx,
    risky: RiskyCall<'_>,
    round: Round<'_>,
    now_ms: i64,
) -> Decision {
    let RiskyCall {
        token_id,
        call,
        description,
        base_url,
    } = risky;
    let hash = engine::call_hash(&call.name, &call.input);
    let url = approve_url(base_url, token_id, &hash);
    if round.responses.is_some() && round.state != Some(hash.as_str()) {
        return Decision::Refuse(
            "That answer was for another call, so nothing was done. Call the tool again to \
             be asked about this one."
                .into(),
        );
    }
    // The owner's approval of exactly this call, taken once.
    match pending
        .take_pending(&approval_key(token_id), &hash, &ctx.action_id.0, now_ms)
        .await
    {
        Ok(Some(approval)) if approval.description == description => return Decision::Run,
        Ok(Some(_)) => {
            return Decision::Refuse(format!(
                "What the call would do has changed since it was approved (now: \
                 {description}), so nothing was done. Call it again to be asked about that."
            ));
        }
        Ok(None) => {}
        Err(err) => {
            tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "reading an MCP approval failed");
            return Decision::Refuse(
                "Bridle could not check for an approval just now, so nothing was done. Try \
                 again in a moment."
                    .into(),
            );
        }
    }
    if let Some(responses) = round.responses {
        // Back from asking its human: whatever the client says, only the page approves.
        return Decision::Refuse(match accepted(responses) {
            Some(true) => format!(
                "Not done yet: “{description}” has not been approved on Bridle's page. Once \
                 the person has approved it at {url} (signed in to Bridle), make the same call \
                 again, within 10 minutes."
            ),
            _ => format!("Not done: the person did not agree to “{description}”."),
        });
    }
    let record = Pending {
        conversation: token_conversation(token_id),
        hash: hash.clone(),
        created_on_action: ctx.action_id.0.clone(),
        description: description.to_owned(),
        expires_at_ms: now_ms + ASK_TTL_MS,
    };
    if let Err(err) = pending.put_pending(&record).await {
        tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "storing an MCP question failed");
        return Decision::Refuse(
            "Bridle could not ask for an approval just now, so nothing was done. Try again in \
             a moment."
                .into(),
        );
    }
    if !round.can_open_url {
        return Decision::Refuse(format!(
            "“{description}” needs the account owner's approval, so nothing was done yet. \
             Ask them to open {url} signed in to Bridle and approve it there (within 10 \
             minutes); then make the same call again."
        ));
    }
    match question(description, &url, &hash) {
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
    fn the_question_sends_the_human_to_the_page() {
        let url = approve_url("https://bridle.example/", "tok_1", "h1");
        assert_eq!(url, "https://bridle.example/approve?token=tok_1&call=h1");
        let ask = question("Cancel Spring Open", &url, "h1").unwrap();
        let wire = serde_json::to_value(&ask).unwrap();
        assert_eq!(wire["resultType"], "input_required", "{wire}");
        assert_eq!(wire["requestState"], "h1");
        let asked = &wire["inputRequests"][CONFIRM_KEY];
        assert_eq!(asked["method"], "elicitation/create", "{wire}");
        assert_eq!(asked["params"]["mode"], "url", "{wire}");
        assert_eq!(asked["params"]["url"], url.as_str(), "{wire}");
        assert!(
            asked["params"]["message"]
                .as_str()
                .unwrap()
                .contains("Cancel Spring Open")
        );
    }

    #[test]
    fn only_accept_is_an_accept() {
        let answer = |v: Value| BTreeMap::from([(CONFIRM_KEY.to_owned(), v)]);
        assert_eq!(accepted(&answer(json!({"action": "accept"}))), Some(true));
        assert_eq!(accepted(&answer(json!({"action": "decline"}))), Some(false));
        assert_eq!(accepted(&answer(json!({"action": "cancel"}))), Some(false));
        assert_eq!(accepted(&BTreeMap::new()), None);
    }

    #[test]
    fn a_tokens_questions_and_approvals_are_kept_apart() {
        assert_ne!(token_conversation("tok_1"), approval_key("tok_1"));
        assert_ne!(approval_key("tok_1"), token_conversation("tok_2"));
    }
}
