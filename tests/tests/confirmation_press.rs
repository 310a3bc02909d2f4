//! A held call is decided by the human's answer (issue 16, point 2): the reply that asks
//! carries the server's Yes / No buttons; a press on the next message runs exactly the held
//! call (even when the model does not repeat it) or voids it; a press that is stale, expired
//! or from another conversation confirms nothing and gets a calm line without a model call; a
//! malformed risky call gets its validation error and never reaches the gate. Each on SQLite
//! and on DynamoDB (moto), through the one job path as the web chat runs it.

use backend::{Reply, ScriptedModel};
use channel_jobs::ChannelJobs;
use engine::{
    ConfirmationGate, ConfirmationOptions, Engine, EngineOptions, NullSink, STALE_PRESS,
    TurnOutcome, risk_policy,
};
use planner::{Caller, NewEvent, Planner};
use queue::TurnJob;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::Duration;
use store::{Account, Store};
use tests::{FlakyStore, web_job, web_jobs};
use tools::Registry;
use transcript::{Conversation, ConversationId, Part, Role, UserId};

const TTL: Duration = Duration::from_secs(600);

struct Rig {
    model: Arc<ScriptedModel>,
    store: Arc<dyn Store>,
    jobs: ChannelJobs,
    planner: Arc<Planner>,
    now: Arc<AtomicI64>,
    sent: AtomicU32,
    event: String,
    dana: String,
}

/// user-1 with conversations conv-1 and conv-2, the planner's tools behind the gate (TTL ten
/// minutes), and a published "Spring Open" with Dana Lee registered.
async fn rig(store: Arc<dyn Store>) -> Rig {
    rig_compacting_past(store, EngineOptions::default().compaction_threshold_chars).await
}

/// The rig with its conversations compacted once their segment holds more than `chars`.
async fn rig_compacting_past(store: Arc<dyn Store>, chars: usize) -> Rig {
    store
        .put_account(&Account::new("user-1", "user-1"))
        .await
        .unwrap();
    for id in ["conv-1", "conv-2"] {
        let mut conv = Conversation::new(ConversationId::from(id), "user-1", "web", "planner");
        conv.created_at_ms = 1;
        store.create_conversation(&conv).await.unwrap();
    }
    let now = Arc::new(AtomicI64::new(1_700_000_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let planner = Arc::new(Planner::new(store.clone()).with_clock(clock.clone()));
    let mut tools = Registry::default();
    planner::register(&mut tools, planner.clone(), &[planner::PURPOSE]).unwrap();
    let policy = {
        let planner = planner.clone();
        risk_policy(move |ctx, tool, args| {
            let planner = planner.clone();
            async move { planner.assess_risk(&ctx, &tool, &args).await }
        })
    };
    let gate = ConfirmationGate::new(Arc::new(policy), store.clone())
        .with_options(ConfirmationOptions { ttl: TTL })
        .with_clock(clock);
    let model = Arc::new(ScriptedModel::new([]));
    let options = EngineOptions {
        model_id: "test-model".into(),
        compaction_threshold_chars: chars,
        ..EngineOptions::default()
    };
    let engine = Engine::new(model.clone(), Arc::new(tools), store.clone(), options)
        .with_confirmation(Arc::new(gate));
    let jobs = web_jobs(Arc::new(engine), store.clone(), now.clone());
    let owner = owner("setup");
    let new_event = NewEvent {
        title: "Spring Open".into(),
        starts_at: "2025-04-12T10:00".into(),
        venue: "Court 1".into(),
        capacity: 10,
    };
    let event = planner.create_event(&owner, new_event).await.unwrap();
    planner.publish_event(&owner, &event.id).await.unwrap();
    let dana = planner
        .register_attendee(&owner, &event.id, "Dana Lee", "dana@example.com")
        .await
        .unwrap();
    Rig {
        model,
        store,
        jobs,
        planner,
        now,
        sent: AtomicU32::new(0),
        event: event.id,
        dana: dana.id,
    }
}

impl Rig {
    /// One message from user-1 in `conv` (a press when `button` is given); the turn's outcome.
    async fn send(&self, conv: &str, text: &str, button: Option<&str>) -> TurnOutcome {
        let n = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let mut job = web_job(conv, "user-1", &format!("m{n}"), text);
        job.button_id = button.map(str::to_owned);
        let ran = self
            .jobs
            .run_streamed(&job, Duration::from_secs(60), &NullSink)
            .await;
        ran.turn
            .unwrap_or_else(|| panic!("the turn did not run: {:?}", ran.outcome))
    }

    fn withdraw_dana(&self) -> Value {
        json!({"attendee_id": self.dana})
    }

    /// A turn in conv-1 in which the model asks to withdraw Dana and then asks the user, with
    /// buttons of its own; the reply's buttons.
    async fn hold_withdrawal(&self, conv: &str) -> Vec<engine::ShapedButton> {
        self.model.push(Reply::tool_call(
            "c1",
            "withdraw_attendee",
            self.withdraw_dana(),
        ));
        self.model.push(Reply::text(
            "Withdraw Dana Lee from Spring Open? <buttons>Sure | Nope</buttons>",
        ));
        let out = self.send(conv, "please withdraw Dana", None).await;
        assert_eq!(self.registered().await, 1, "held, not run: {:?}", out.reply);
        out.buttons
    }

    /// The audited actions that withdrew someone.
    async fn withdrawals(&self) -> usize {
        let audit = self.store.audit_log(&"user-1".into()).await.unwrap();
        audit
            .iter()
            .filter(|e| {
                e.changes
                    .iter()
                    .any(|c| c.kind == "attendee" && c.after.is_none())
            })
            .count()
    }

    async fn registered(&self) -> usize {
        let owner = owner("read");
        self.planner
            .list_attendees(&owner, &self.event)
            .await
            .unwrap()
            .len()
    }

    /// The text of the user's message in the model's newest request.
    fn last_user_text(&self) -> String {
        let requests = self.model.requests();
        let request = requests.last().expect("a model call");
        let user = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .unwrap();
        user.parts.iter().filter_map(Part::as_text).collect()
    }

    /// A Yes press on conv-1's held withdrawal (its buttons).
    fn yes_press(&self, buttons: &[engine::ShapedButton]) -> TurnJob {
        let mut press = web_job("conv-1", "user-1", "m-press", "Yes, do it");
        press.button_id = Some(buttons[0].id.clone());
        press
    }

    /// The retry of a Yes press whose first attempt died after the withdrawal ran: the model
    /// is told it was done (not the stale line), and Dana stays withdrawn; its reply.
    async fn retry_told_withdrawn(&self, press: &TurnJob) -> String {
        self.model.push(Reply::text("Done: Dana Lee is withdrawn."));
        let ran = self
            .jobs
            .run_streamed(press, Duration::from_secs(60), &NullSink)
            .await;
        let out = ran.turn.expect("the retry runs the turn");
        assert_eq!(
            out.reply, "Done: Dana Lee is withdrawn.",
            "not the stale line"
        );
        let said = self.last_user_text();
        assert!(
            said.contains("the harness ran it") && said.contains("Dana Lee"),
            "the model reads what was done: {said}"
        );
        assert_eq!(self.registered().await, 0);
        out.reply
    }

    /// The newest tool result in `conv`.
    async fn last_result(&self, conv: &str) -> Value {
        let rows = self
            .store
            .messages(&ConversationId::from(conv), 0)
            .await
            .unwrap();
        let tool = rows.iter().rev().find(|m| m.role == Role::Tool).unwrap();
        match tool.parts.last().unwrap() {
            Part::ToolResult { content, .. } => content.clone(),
            other => panic!("not a tool result: {other:?}"),
        }
    }
}

/// user-1 acting directly (not through the model), as the setup and the checks do.
fn owner(action: &str) -> Caller {
    Caller::from_ctx(&tools::Ctx {
        user_id: UserId::from("user-1"),
        actor: tools::Actor::User,
        action_id: tools::ActionId(action.into()),
        conversation_id: ConversationId::from("conv-1"),
        call_key: None,
        grant: tools::Grant::default(),
    })
}

fn held(result: &Value) -> bool {
    result["error"]
        .as_str()
        .is_some_and(|e| e.starts_with("NOT EXECUTED: needs confirmation"))
}

/// A server that numbers each answer's calls afresh (legacy `function_call`, or one that sends
/// no ids) gives two answers of one turn the same call id: each held withdrawal is kept under
/// an id of its own, so a Yes press runs both, and the model is told of each, not one twice.
#[tokio::test]
async fn a_yes_press_runs_every_held_call_though_two_answers_gave_the_same_id() {
    let r = rig(Arc::new(
        store_sqlite::SqliteStore::open_in_memory().unwrap(),
    ))
    .await;
    let sam = r
        .planner
        .register_attendee(&owner("setup"), &r.event, "Sam Roe", "sam@example.com")
        .await
        .unwrap();
    r.model.push(Reply::tool_call(
        "c1",
        "withdraw_attendee",
        r.withdraw_dana(),
    ));
    r.model.push(Reply::tool_call(
        "c1",
        "withdraw_attendee",
        json!({"attendee_id": sam.id}),
    ));
    r.model.push(Reply::text("Withdraw both?"));
    let out = r.send("conv-1", "please withdraw Dana and Sam", None).await;
    assert_eq!(r.registered().await, 2, "held, not run: {:?}", out.reply);
    let rows = r
        .store
        .messages(&ConversationId::from("conv-1"), 0)
        .await
        .unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1], "each call keeps an id of its own");

    r.model.push(Reply::text("Both are withdrawn."));
    r.send("conv-1", "Yes, do it", Some(&out.buttons[0].id))
        .await;
    assert_eq!(r.registered().await, 0, "both held calls ran");
    let said = r.last_user_text();
    assert!(
        said.contains("Dana Lee") && said.contains("Sam Roe"),
        "the model reads what ran: {said}"
    );
}

/// A call held for the last place of an event, then run in the same turn once the model had
/// raised the capacity (it was no longer risky), is asked about no more: the reply offers no
/// buttons and lists nothing a yes would do (its pending record is void too).
#[tokio::test]
async fn a_held_call_that_ran_later_in_the_turn_is_asked_about_no_more() {
    let r = rig(Arc::new(
        store_sqlite::SqliteStore::open_in_memory().unwrap(),
    ))
    .await;
    let changes = planner::EventChanges {
        capacity: Some(2),
        ..planner::EventChanges::default()
    };
    r.planner
        .update_event(&owner("setup"), &r.event, changes)
        .await
        .unwrap();
    let eve = json!({"event_id": r.event, "name": "Eve Ng", "email": "eve@example.com"});
    r.model
        .push(Reply::tool_call("c1", "register_attendee", eve.clone()));
    r.model.push(Reply::tool_call(
        "c2",
        "update_event",
        json!({"event_id": r.event, "capacity": 5}),
    ));
    r.model
        .push(Reply::tool_call("c3", "register_attendee", eve.clone()));
    r.model.push(Reply::text("Eve is registered."));
    let out = r
        .send("conv-1", "register Eve, add places if needed", None)
        .await;
    assert_eq!(r.registered().await, 2, "{:?}", out.reply);
    assert!(out.buttons.is_empty(), "nothing is held any more: {out:?}");
    assert!(!out.reply.contains("If you say yes"), "{}", out.reply);
    // Its pending record is gone too: made on this very turn, no "yes" on the next (to a
    // question never shown) could take it, and a call it describes alike (an undo whose
    // effect is back to what was asked) run unasked.
    let pending = r
        .store
        .read_pending(
            &ConversationId::from("conv-1"),
            &engine::call_hash("register_attendee", &eve),
            r.now.load(Ordering::SeqCst),
        )
        .await
        .unwrap();
    assert_eq!(pending, None);
}

/// The held call's reply carries the server's buttons (not the model's), and a Yes press on
/// the next message runs exactly that call though the model never repeats it.
async fn a_yes_press_runs_the_held_call(store: Arc<dyn Store>) {
    let r = rig(store).await;
    let buttons = r.hold_withdrawal("conv-1").await;
    let titles: Vec<&str> = buttons.iter().map(|b| b.title.as_str()).collect();
    assert_eq!(titles, ["Yes, do it", "No"], "the server's buttons win");
    assert!(
        buttons[0].id.starts_with("confirm:") && buttons[0].id.ends_with(":yes"),
        "{buttons:?}"
    );
    let visible = r
        .store
        .visible(&ConversationId::from("conv-1"))
        .await
        .unwrap();
    assert_eq!(
        visible.last().unwrap().buttons.len(),
        2,
        "the buttons are recorded with the reply"
    );

    // The model only talks; the server runs the held call.
    r.model.push(Reply::text("Done: Dana Lee is withdrawn."));
    let before = r.model.requests().len();
    let out = r.send("conv-1", "Yes, do it", Some(&buttons[0].id)).await;
    assert_eq!(r.registered().await, 0, "the held call ran");
    assert_eq!(r.model.requests().len(), before + 1);
    let said = r.last_user_text();
    assert!(
        said.contains("Yes, do it")
            && said.contains("the harness ran it")
            && said.contains("withdraw_attendee"),
        "the model reads what happened: {said}"
    );
    assert!(out.buttons.is_empty(), "nothing is held any more");
    let visible = r
        .store
        .visible(&ConversationId::from("conv-1"))
        .await
        .unwrap();
    assert_eq!(visible[visible.len() - 2].text, "Yes, do it");

    // The same press again (a redelivery with another id, or a double tap): nothing more.
    let out = r.send("conv-1", "Yes, do it", Some(&buttons[0].id)).await;
    assert_eq!(out.reply, STALE_PRESS);
    assert_eq!(r.model.requests().len(), before + 1, "no model call");
}

/// A held undo asks about what it would revert then; a Yes press runs it only if that is still
/// what it would do. Here the model held "undo" (withdrawing Eve) and then, in the same turn,
/// made a change that needs no yes: the undo would now revert that change instead, which the
/// user was never asked about, so the press runs nothing.
async fn a_yes_press_runs_no_undo_that_now_reverts_something_else(store: Arc<dyn Store>) {
    let r = rig(store).await;
    r.model.push(Reply::tool_call(
        "c1",
        "register_attendee",
        json!({"event_id": r.event, "name": "Eve Ng", "email": "eve@example.com"}),
    ));
    r.model.push(Reply::text("Eve is registered."));
    r.send("conv-2", "register Eve", None).await;
    assert_eq!(r.registered().await, 2);
    r.model.push(Reply::tool_call("c2", "undo", json!({})));
    r.model.push(Reply::tool_call(
        "c3",
        "update_event",
        json!({"event_id": r.event, "capacity": 150}),
    ));
    r.model.push(Reply::text("Shall I undo that?"));
    let out = r.send("conv-2", "actually, take that back", None).await;
    assert_eq!(out.buttons.len(), 2, "the undo is held: {:?}", out.reply);
    let capacity = || async {
        r.planner
            .list_events(&owner("read"))
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.id == r.event)
            .unwrap()
            .capacity
    };
    assert_eq!(capacity().await, 150);

    r.model.push(Reply::text("Nothing changed."));
    r.send("conv-2", "Yes, do it", Some(&out.buttons[0].id))
        .await;
    assert_eq!(
        capacity().await,
        150,
        "the change nobody was asked about stays"
    );
    assert_eq!(
        r.registered().await,
        2,
        "and what was asked about did not run"
    );
}

/// A No press voids the held call without asking the model to decide: the identical call
/// made afterwards is held again, not run.
async fn a_no_press_voids_it(store: Arc<dyn Store>) {
    let r = rig(store).await;
    let buttons = r.hold_withdrawal("conv-1").await;
    r.model.push(Reply::tool_call(
        "c2",
        "withdraw_attendee",
        r.withdraw_dana(),
    ));
    r.model.push(Reply::text("Alright, I will not."));
    r.send("conv-1", "No", Some(&buttons[1].id)).await;
    assert_eq!(r.registered().await, 1, "a No press runs nothing");
    assert!(held(&r.last_result("conv-1").await));
    let said = r.model.requests()[r.model.requests().len() - 2]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap()
        .parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<String>();
    assert!(said.contains("was not run and is cancelled"), "{said}");
}

/// A press that is not for the previous message, that expired, or that comes from another
/// conversation confirms nothing, and the harness answers it without the model.
async fn a_stale_press_confirms_nothing(store: Arc<dyn Store>) {
    let r = rig(store).await;
    // Two messages later.
    let buttons = r.hold_withdrawal("conv-1").await;
    r.model.push(Reply::text("Take your time."));
    r.send("conv-1", "hmm, let me think", None).await;
    let calls = r.model.requests().len();
    let out = r.send("conv-1", "Yes, do it", Some(&buttons[0].id)).await;
    assert_eq!(out.reply, STALE_PRESS);
    assert_eq!(r.model.requests().len(), calls, "no model call");
    assert_eq!(r.registered().await, 1);

    // Expired: the next message, but after the TTL.
    let buttons = r.hold_withdrawal("conv-1").await;
    r.now
        .fetch_add(TTL.as_millis() as i64 + 1, Ordering::SeqCst);
    let out = r.send("conv-1", "Yes, do it", Some(&buttons[0].id)).await;
    assert_eq!(out.reply, STALE_PRESS);
    assert_eq!(r.registered().await, 1);

    // Another conversation's button, pressed where the same call is held.
    let elsewhere = r.hold_withdrawal("conv-1").await;
    r.hold_withdrawal("conv-2").await;
    let out = r.send("conv-2", "Yes, do it", Some(&elsewhere[0].id)).await;
    assert_eq!(out.reply, STALE_PRESS);
    assert_eq!(r.registered().await, 1);
}

/// A risky call with invalid arguments gets the validation error like any call and holds
/// nothing; the valid call is held, and the user's typed "yes" still confirms it.
async fn invalid_arguments_are_refused_before_the_gate(store: Arc<dyn Store>) {
    let r = rig(store).await;
    // Moving a published event is risky; capacity 0 is invalid.
    let invalid = json!({"event_id": r.event, "venue": "Court 2", "capacity": 0});
    let valid = json!({"event_id": r.event, "venue": "Court 2"});
    r.model
        .push(Reply::tool_call("c1", "update_event", invalid.clone()));
    r.model
        .push(Reply::tool_call("c2", "update_event", valid.clone()));
    r.model
        .push(Reply::text("Move Spring Open to Court 2? Yes or no?"));
    let out = r.send("conv-1", "move it to court 2", None).await;
    let rows = r
        .store
        .messages(&ConversationId::from("conv-1"), 0)
        .await
        .unwrap();
    let results: Vec<Value> = rows
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    let first = results[0]["error"].as_str().unwrap();
    assert!(
        first.starts_with("Invalid arguments for update_event"),
        "validation comes first: {first}"
    );
    assert!(held(&results[1]), "{}", results[1]);
    assert_eq!(out.buttons.len(), 2);

    // A typed yes: the model repeats the valid call, which runs.
    r.model
        .push(Reply::tool_call("c3", "update_event", valid.clone()));
    r.model.push(Reply::text("Moved."));
    r.send("conv-1", "yes", None).await;
    let result = r.last_result("conv-1").await;
    assert!(result.get("error").is_none(), "{result}");
    let owner = owner("read");
    let events = r.planner.list_events(&owner).await.unwrap();
    assert_eq!(events[0].venue, "Court 2");
}

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap())
}

async fn dynamo() -> Arc<dyn Store> {
    tests::moto::dynamo_store("press").await
}

macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::sqlite().await).await;
            })*
        }
        mod on_dynamodb {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::dynamo().await).await;
            })*
        }
    };
}

on_both_stores!(
    a_yes_press_runs_the_held_call,
    a_yes_press_runs_no_undo_that_now_reverts_something_else,
    a_press_after_the_grant_was_lowered_runs_nothing,
    a_no_press_voids_it,
    a_stale_press_confirms_nothing,
    invalid_arguments_are_refused_before_the_gate,
);

/// A Yes press whose attempt died after the held call's effect, before its result was
/// recorded: the retry of the same message finds the pending record used and answers from
/// the effect's receipt — the user is told it was done, and it is not done twice.
#[tokio::test]
async fn a_yes_press_cut_after_the_effect_is_told_as_done_on_its_retry() {
    let flaky = Arc::new(FlakyStore::new(Arc::new(
        store_sqlite::SqliteStore::open_in_memory().unwrap(),
    )));
    let r = rig(flaky.clone()).await;
    let buttons = r.hold_withdrawal("conv-1").await;
    let press = r.yes_press(&buttons);
    flaky.fail_results_after(0);
    let first = r.jobs.run(&press, Duration::from_secs(60)).await;
    assert!(
        matches!(first, channel_jobs::JobOutcome::Failed(_)),
        "{first:?}"
    );
    assert_eq!(r.registered().await, 0, "the withdrawal was committed");
    flaky.heal();

    let reply = r.retry_told_withdrawn(&press).await;
    assert_ne!(reply, STALE_PRESS);
    assert_eq!(r.withdrawals().await, 1, "withdrawn once");
}

/// A Yes press in a conversation due for compaction, cut short after the held call ran and
/// before its result was recorded, on an attempt whose compaction could not be made (the model
/// overloaded): the retry, whose compaction would succeed, finds what the first attempt ran,
/// since a press's turn does not compact (compacting first would move where its results are
/// kept by whether it succeeded). The user is told it was done, not "Nothing was done", and it
/// is done once; the next turn compacts.
#[tokio::test]
async fn a_yes_press_due_for_compaction_is_told_as_done_on_its_retry() {
    let flaky = Arc::new(FlakyStore::new(Arc::new(
        store_sqlite::SqliteStore::open_in_memory().unwrap(),
    )));
    let r = rig_compacting_past(flaky.clone(), 200).await;
    let buttons = r.hold_withdrawal("conv-1").await;
    let press = r.yes_press(&buttons);
    // Were the press's turn to compact: the first attempt's try fails, the retry's succeeds.
    r.model
        .push(Reply::error(backend::BackendError::Overloaded));
    r.model
        .push(Reply::text("Notes: the user asked to withdraw Dana Lee."));
    flaky.fail_results_after(0);
    let first = r.jobs.run(&press, Duration::from_secs(60)).await;
    assert!(
        matches!(first, channel_jobs::JobOutcome::Failed(_)),
        "{first:?}"
    );
    assert_eq!(r.registered().await, 0, "the withdrawal was committed");
    flaky.heal();
    // The retry is given its answer alone: the press's turn asks for no notes.
    r.model.clear();
    let before = r.model.request_count();
    r.retry_told_withdrawn(&press).await;
    assert_eq!(r.model.request_count(), before + 1, "one call: the answer");
    let conv = r
        .store
        .conversation(&ConversationId::from("conv-1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 0, "the press's turn did not compact");
    assert_eq!(r.withdrawals().await, 1, "withdrawn once");

    r.model.push(Reply::text("Notes: Dana Lee was withdrawn."));
    r.model.push(Reply::text("Anything else?"));
    r.send("conv-1", "thanks", None).await;
    let conv = r
        .store
        .conversation(&ConversationId::from("conv-1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conv.segment, 1, "the next turn compacts");
}

/// The grant lowered below risky between the question and the press: the press runs nothing
/// (the assistant may no longer do it), and the model reads why.
async fn a_press_after_the_grant_was_lowered_runs_nothing(store: Arc<dyn Store>) {
    let r = rig(store).await;
    let buttons = r.hold_withdrawal("conv-1").await;
    let lowered = Account {
        assistant_grant: tools::Grant::Write,
        ..Account::new("user-1", "user-1")
    };
    r.store.put_account(&lowered).await.unwrap();
    r.model
        .push(Reply::text("Your settings do not let me do that."));
    let out = r.send("conv-1", "Yes, do it", Some(&buttons[0].id)).await;
    assert_eq!(r.registered().await, 1, "Dana is still registered");
    assert_eq!(out.reply, "Your settings do not let me do that.");
    let said = r.last_user_text();
    assert!(said.contains("Not allowed by your settings"), "{said}");
}
