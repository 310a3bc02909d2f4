//! Context discipline: frozen prefix, the per-turn context block, two transcripts, compaction
//! into segments, rejected-reasoning recovery and lean mode — all through the real engine with
//! the scripted model on in-memory SQLite.

use async_trait::async_trait;
use backend::{BackendError, ChatRequest, OptionalFeature, Reply};
use engine::{COMPACTION_PROMPT, ContextFacts, ContextSource, EngineOptions, TurnEnd};
use serde_json::json;
use std::sync::{Arc, Mutex};
use store::{ConversationStore, MessageStore};
use tests::{Harness, Logs};
use transcript::{ConversationId, Part, Role, StopReason, UserId};

/// A context source whose facts the test edits between turns (as the web UI would).
#[derive(Default)]
struct Board(Mutex<ContextFacts>);

impl Board {
    fn set_records(&self, records: &str) {
        self.0.lock().unwrap().records = Some(records.to_owned());
    }
}

#[async_trait]
impl ContextSource for Board {
    async fn facts(&self, _: &UserId, _: &ConversationId) -> Result<ContextFacts, String> {
        Ok(self.0.lock().unwrap().clone())
    }
}

// 2026-11-30T09:15:00Z
const NOW: i64 = 1_796_030_100_000;

async fn with_context(replies: Vec<Reply>, options: EngineOptions) -> (Harness, Arc<Board>) {
    let board = Arc::new(Board::default());
    {
        let mut facts = board.0.lock().unwrap();
        facts.user_name = Some("Dana Lee".into());
        facts.time_zone = Some("Europe/Berlin".into());
        facts.records = Some("- e1 Spring Open, 2027-03-14, published".into());
    }
    let source: Arc<dyn ContextSource> = board.clone();
    let h = Harness::with_options(replies, options)
        .await
        .customise(|e| e.with_context(source).with_clock(Arc::new(|| NOW)));
    (h, board)
}

fn text_of(part: &Part) -> &str {
    part.as_text().expect("a text part")
}

fn has_reasoning(request: &ChatRequest) -> bool {
    request
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .any(|p| matches!(p, Part::Reasoning(_)))
}

#[tokio::test]
async fn request_n_plus_one_starts_with_request_n_byte_for_byte() {
    let (h, board) = with_context(
        vec![
            Reply::new()
                .reason("Look first.", "sig-1")
                .call("t1", "list_events", json!({}))
                .stop(StopReason::ToolUse),
            Reply::text("You have Spring Open."),
            Reply::text("Noted."),
        ],
        EngineOptions::default(),
    )
    .await;
    h.turn("what's on?").await;
    board.set_records("- e1 Spring Open, 2027-03-14, cancelled");
    h.turn("thanks").await;
    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert_eq!(before.system.as_bytes(), after.system.as_bytes());
        assert_eq!(
            serde_json::to_vec(&before.tools).unwrap(),
            serde_json::to_vec(&after.tools).unwrap()
        );
        assert!(after.messages.len() > before.messages.len());
        for (i, m) in before.messages.iter().enumerate() {
            assert_eq!(
                serde_json::to_vec(m).unwrap(),
                serde_json::to_vec(&after.messages[i]).unwrap(),
                "message {i} changed between requests"
            );
        }
    }
    // The tool list is the same tools in the same order with the same descriptions.
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[tokio::test]
async fn the_context_block_is_fresh_each_turn_and_stored_verbatim() {
    let (h, board) = with_context(
        vec![
            Reply::text("You have Spring Open."),
            Reply::text("It is cancelled."),
        ],
        EngineOptions::default(),
    )
    .await;
    h.turn("what's on?").await;
    // An edit made between turns, e.g. through the web UI.
    board.set_records("- e1 Spring Open, 2027-03-14, cancelled");
    h.turn("and now?").await;

    let requests = h.model.requests();
    let first_block = text_of(&requests[0].messages[0].parts[0]).to_owned();
    assert_eq!(
        first_block,
        "<context>\nnow: Monday 30 November 2026, 10:15 (Europe/Berlin)\n\
         user: Dana Lee, on web\nrecords:\n- e1 Spring Open, 2027-03-14, published\n\
         </context>\n<user_message>\nwhat's on?\n</user_message>"
    );
    let second = &requests[1].messages;
    let newest = text_of(&second.last().unwrap().parts[0]);
    assert!(newest.contains("2027-03-14, cancelled"), "{newest}");
    assert!(newest.ends_with("<user_message>\nand now?\n</user_message>"));
    // The first turn's block is replayed as it was written, not rebuilt.
    assert_eq!(text_of(&second[0].parts[0]), first_block);

    // Stored verbatim in the model transcript …
    let stored = h.transcript().await;
    let user_rows: Vec<&str> = stored
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| text_of(&m.parts[0]))
        .collect();
    assert_eq!(user_rows, vec![first_block.as_str(), newest]);
    // … while the visible transcript keeps the user's own words.
    let visible: Vec<String> = h.visible().await.into_iter().map(|e| e.text).collect();
    assert_eq!(
        visible,
        vec![
            "what's on?",
            "You have Spring Open.",
            "and now?",
            "It is cancelled."
        ]
    );
}

#[tokio::test]
async fn a_failing_context_source_still_gives_time_and_channel() {
    struct Broken;
    #[async_trait]
    impl ContextSource for Broken {
        async fn facts(&self, _: &UserId, _: &ConversationId) -> Result<ContextFacts, String> {
            Err("records table unavailable".into())
        }
    }
    let logs = Logs::default();
    let _g = logs.install();
    let h = Harness::new([Reply::text("Hello.")]).await.customise(|e| {
        e.with_context(Arc::new(Broken))
            .with_clock(Arc::new(|| NOW))
    });
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    let sent = text_of(&h.model.requests()[0].messages[0].parts[0]).to_owned();
    assert!(sent.starts_with("<context>\nnow: Monday 30 November 2026, 09:15 (UTC)\nuser: (name unknown), on web\n</context>"), "{sent}");
    assert!(logs.text().contains("records table unavailable"));
}

#[tokio::test]
async fn three_tool_rounds_store_one_visible_reply_and_seven_model_messages() {
    let h = Harness::new([
        Reply::tool_call("t1", "list_events", json!({})),
        Reply::tool_call(
            "t2",
            "create_event",
            json!({"title": "Z", "date": "2026-01-02"}),
        ),
        Reply::tool_call("t3", "list_events", json!({})),
        Reply::text("Done: Z is on 2 January."),
    ])
    .await;
    let t = h.turn("add Z").await;
    assert_eq!(t.outcome.tool_errors, 0);
    let rows = h.transcript().await;
    let roles: Vec<Role> = rows.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, Tool as T, User as U};
    assert_eq!(roles, vec![U, A, T, A, T, A, T, A]);
    assert_eq!(rows.len() - 1, 7, "seven model messages after the user's");
    let visible = h.visible().await;
    assert_eq!(visible.len(), 2);
    assert_eq!(visible[1].text, "Done: Z is on 2 January.");
}

fn small_threshold() -> EngineOptions {
    EngineOptions {
        compaction_threshold_chars: 200,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_conversation_an_operator_took_over_is_not_compacted() {
    // Past the threshold, but paused (a human took over): no model call at all, the notes'
    // neither — a sender's flood into it costs nothing.
    let long = "I prefer morning events, and my venue is the Town Hall. ".repeat(5);
    let h = Harness::with_options(
        [Reply::text("Noted your preferences."), Reply::text("never")],
        small_threshold(),
    )
    .await;
    h.turn(&long).await;
    let mut conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    conv.status = transcript::ConversationStatus::Paused;
    h.store.update_conversation(&conv).await.unwrap();
    for text in ["hello?", "anyone?"] {
        h.turn(text).await;
    }
    assert_eq!(h.model.requests().len(), 1, "only the first turn's call");
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 0, "not compacted");
}

#[tokio::test]
async fn compaction_opens_a_new_segment_with_notes_and_replays_only_it() {
    let long = "I prefer morning events, and my venue is the Town Hall. ".repeat(5);
    let h = Harness::with_options(
        [
            Reply::text("Noted your preferences."),
            Reply::text("Facts:\n- prefers morning events\n- venue: Town Hall"),
            Reply::text("Morning it is."),
            Reply::text("Sure."),
        ],
        small_threshold(),
    )
    .await;
    h.turn(&long).await;
    // Under the threshold nothing happens: one call.
    assert_eq!(h.model.requests().len(), 1);

    let t = h.turn("plan one for May").await;
    assert_eq!(t.outcome.reply, "Morning it is.");
    assert_eq!(t.outcome.model_calls, 2, "the notes call and the answer");
    let requests = h.model.requests();
    let notes_call = &requests[1];
    assert_eq!(notes_call.system, COMPACTION_PROMPT);
    assert!(notes_call.tools.is_empty());
    assert!(text_of(&notes_call.messages[0].parts[0]).contains("my venue is the Town Hall"));

    // The answer saw only the new segment: the notes, then the new message.
    let answer = &requests[2];
    assert_eq!(answer.messages.len(), 1);
    let parts: Vec<&str> = answer.messages[0].parts.iter().map(text_of).collect();
    assert_eq!(
        parts,
        vec![
            "<notes>\nFacts:\n- prefers morning events\n- venue: Town Hall\n</notes>",
            "plan one for May"
        ]
    );

    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 1);
    // Old rows stay for audit, untouched.
    let old = h.store.messages(&h.conversation, 0).await.unwrap();
    assert_eq!(old.len(), 2);
    assert_eq!(text_of(&old[0].parts[0]), long);
    let new = h.store.messages(&h.conversation, 1).await.unwrap();
    assert_eq!(new.len(), 3, "notes, user message, answer");
    assert!(new[0].call.is_some(), "the notes carry their call record");
    assert!(new.iter().all(|m| m.position > old[1].position));

    // The next turn replays the new segment only, and stays under the threshold.
    h.turn("thanks").await;
    let last = h.model.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 3);
    assert!(text_of(&last.messages[0].parts[0]).starts_with("<notes>"));
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 1);
}

#[tokio::test]
async fn segments_keep_counting_up() {
    let chunk = "x".repeat(250);
    let h = Harness::with_options(
        [
            Reply::text("a"),
            Reply::text("notes one"),
            Reply::text("b"),
            Reply::text("notes two"),
            Reply::text("c"),
        ],
        small_threshold(),
    )
    .await;
    h.turn(&chunk).await;
    h.turn(&chunk).await; // compacts into segment 1, then adds 250 more chars
    h.turn("again").await; // compacts into segment 2
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 2);
    let seg2 = h.store.messages(&h.conversation, 2).await.unwrap();
    assert_eq!(text_of(&seg2[0].parts[0]), "<notes>\nnotes two\n</notes>");
    // The second summary was written from segment 1, which opened with the first notes.
    let second_notes_call = &h.model.requests()[3];
    assert!(text_of(&second_notes_call.messages[0].parts[0]).contains("notes one"));
}

#[tokio::test]
async fn when_summarising_fails_the_turn_carries_on_with_the_full_history() {
    let long = "a long message about the plan ".repeat(10);
    let logs = Logs::default();
    let _g = logs.install();
    let h = Harness::with_options(
        [
            Reply::text("Got it."),
            Reply::error(BackendError::Overloaded),
            Reply::text("Still here."),
            Reply::text(""),
            Reply::text("And again."),
        ],
        small_threshold(),
    )
    .await;
    h.turn(&long).await;
    let t = h.turn("next").await;
    assert_eq!(t.outcome.reply, "Still here.");
    let requests = h.model.requests();
    assert_eq!(
        requests[2].messages.len(),
        3,
        "full history: user, assistant, user"
    );
    assert!(logs.text().contains("compaction failed"));
    // An empty summary is a failure too.
    let t = h.turn("more").await;
    assert_eq!(t.outcome.reply, "And again.");
    assert!(logs.text().contains("compaction produced no notes"));
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 0);
}

/// A compaction that fails in a way trying again would not mend (`failure`) is put off until
/// the segment has grown by a quarter of the threshold (200 here: 50 characters), so a turn
/// in between costs one call, not two; the mark is kept on the conversation, and cleared once a
/// compaction succeeds.
async fn a_compaction_that_cannot_succeed_waits_for_the_segment_to_grow(failure: Reply) {
    let h = Harness::with_options(
        [
            Reply::text("Got it."),
            failure,
            Reply::text("Still here."),
            Reply::text("Fine."),
            Reply::text("Sure."),
            Reply::text("Facts:\n- likes mornings"),
            Reply::text("Compacted."),
        ],
        small_threshold(),
    )
    .await;
    async fn retry_at(h: &Harness) -> (u32, u64) {
        let conv = h
            .store
            .conversation(&h.conversation)
            .await
            .unwrap()
            .unwrap();
        (conv.segment, conv.compaction_retry_at_chars)
    }
    h.turn(&"a".repeat(300)).await;
    // 307 characters so far: the notes call fails, and the next waits for 357.
    assert_eq!(h.turn("next").await.outcome.reply, "Still here.");
    assert_eq!(retry_at(&h).await, (0, 357));
    // 322, then 329: one call each, the answer.
    assert_eq!(h.turn("ok").await.outcome.reply, "Fine.");
    assert_eq!(h.turn(&"b".repeat(40)).await.outcome.reply, "Sure.");
    let requests = h.model.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[3..].iter().all(|r| r.system != COMPACTION_PROMPT));
    // 374: tried again, and it works.
    assert_eq!(h.turn("more").await.outcome.reply, "Compacted.");
    assert_eq!(h.model.requests()[5].system, COMPACTION_PROMPT);
    assert_eq!(retry_at(&h).await, (1, 0));
}

#[tokio::test]
async fn a_compaction_without_notes_waits_for_the_segment_to_grow() {
    a_compaction_that_cannot_succeed_waits_for_the_segment_to_grow(Reply::text("")).await;
}

/// A summary that ran out of time would run out again (the segment only grows): put off too.
#[tokio::test]
async fn a_compaction_that_timed_out_waits_for_the_segment_to_grow() {
    a_compaction_that_cannot_succeed_waits_for_the_segment_to_grow(Reply::error(
        BackendError::Timeout {
            after: std::time::Duration::from_secs(60),
        },
    ))
    .await;
}

#[tokio::test]
async fn a_compaction_the_provider_refuses_waits_for_the_segment_to_grow() {
    a_compaction_that_cannot_succeed_waits_for_the_segment_to_grow(Reply::error(
        BackendError::ContextTooLong,
    ))
    .await;
}

#[tokio::test]
async fn rejected_reasoning_is_stripped_and_the_call_retried_once() {
    let logs = Logs::default();
    let _g = logs.install();
    let h = Harness::new([
        Reply::new()
            .reason("Think.", "sig-old")
            .call("t1", "list_events", json!({}))
            .stop(StopReason::ToolUse),
        Reply::text("Two events."),
        Reply::error(BackendError::ReasoningRejected {
            message: "messages.1.content.0: Invalid signature in thinking block".into(),
        }),
        Reply::text("Still two."),
    ])
    .await;
    h.turn("what's on?").await;
    let t = h.turn("again?").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    assert_eq!(t.outcome.reply, "Still two.");
    let requests = h.model.requests();
    assert!(
        has_reasoning(&requests[2]),
        "the first try replays reasoning"
    );
    let retry = &requests[3];
    assert!(!has_reasoning(retry));
    // Text and tool calls stay.
    let kept = &retry.messages[1].parts;
    assert!(
        kept.iter()
            .any(|p| matches!(p, Part::ToolUse { name, .. } if name == "list_events"))
    );
    assert_eq!(retry.messages.len(), requests[2].messages.len());
    // The stored transcript is not rewritten.
    let stored = h.transcript().await;
    assert!(matches!(stored[1].parts[0], Part::Reasoning(_)));
    assert!(logs.text().contains("replayed reasoning rejected"));
}

#[tokio::test]
async fn reasoning_rejected_twice_ends_calmly() {
    let reject = || {
        Reply::error(BackendError::ReasoningRejected {
            message: "Invalid signature in thinking block".into(),
        })
    };
    let h = Harness::new([reject(), reject()]).await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(h.model.requests().len(), 2, "one retry, no more");
    assert!(!t.outcome.reply.contains("signature"));
}

#[tokio::test]
async fn a_refused_optional_feature_switches_the_process_to_lean_mode() {
    let logs = Logs::default();
    let _g = logs.install();
    let options = EngineOptions {
        settings: backend::InferenceSettings {
            reasoning_budget: Some(2_048),
            ..Default::default()
        },
        ..Default::default()
    };
    let h = Harness::with_options(
        [
            Reply::error(BackendError::FeatureRejected {
                feature: OptionalFeature::PromptCache,
                message:
                    "You invoked an unsupported model or your request did not allow prompt caching"
                        .into(),
            }),
            Reply::error(BackendError::FeatureRejected {
                feature: OptionalFeature::Reasoning,
                message: "extraneous key [thinking] is not permitted".into(),
            }),
            Reply::text("Hello."),
            Reply::text("Hello again."),
        ],
        options,
    )
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.reply, "Hello.");
    let r = h.model.requests();
    assert!(r[0].settings.prompt_cache && r[0].settings.reasoning_budget.is_some());
    assert!(!r[1].settings.prompt_cache && r[1].settings.reasoning_budget.is_some());
    assert!(!r[2].settings.prompt_cache && r[2].settings.reasoning_budget.is_none());
    // Process-wide: the next turn asks for neither.
    h.turn("hi again").await;
    let last = h.model.requests().pop().unwrap();
    assert!(!last.settings.prompt_cache && last.settings.reasoning_budget.is_none());
    assert!(h.engine.lean().dropped(OptionalFeature::PromptCache));
    assert!(logs.text().contains("lean mode"));
}

#[tokio::test]
async fn the_conversation_records_the_prompt_version() {
    let h = Harness::new([Reply::text("Hi.")]).await;
    h.turn("hi").await;
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.prompt_version, engine::PROMPT_VERSION);
    assert_eq!(h.model.requests()[0].system, engine::DEFAULT_SYSTEM_PROMPT);
}

/// A compaction that crashed after writing its notes (the conversation still on the old
/// segment) under a threshold since raised: the next turn's first row meets the notes' position
/// and moves on to their segment instead of failing or writing over them.
#[tokio::test]
async fn notes_left_by_a_crashed_compaction_are_adopted_below_the_threshold() {
    let h = Harness::new([Reply::text("First."), Reply::text("Second.")]).await;
    h.turn("hello").await;
    let old = h.store.messages(&h.conversation, 0).await.unwrap();
    assert_eq!(old.len(), 2);
    let notes = transcript::Message {
        conversation_id: h.conversation.clone(),
        segment: 1,
        position: old[1].position + 1,
        role: Role::User,
        parts: vec![Part::text("<notes>\nsays hello\n</notes>")],
        call: None,
        action_id: Some("crashed-compaction".into()),
        created_at_ms: 0,
    };
    h.store.append_message(&notes).await.unwrap();

    let t = h.turn("and again").await;
    assert_eq!(t.outcome.reply, "Second.");
    let conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 1);
    let new = h.store.messages(&h.conversation, 1).await.unwrap();
    let positions: Vec<u64> = new.iter().map(|m| m.position).collect();
    assert_eq!(
        positions,
        vec![notes.position, notes.position + 1, notes.position + 2]
    );
    assert_eq!(text_of(&new[1].parts[0]), "and again");
    // The answer saw the notes, then the new message.
    let answer = h.model.requests().pop().unwrap();
    assert!(text_of(&answer.messages[0].parts[0]).starts_with("<notes>"));
    assert_eq!(h.store.messages(&h.conversation, 0).await.unwrap(), old);
}
