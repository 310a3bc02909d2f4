//! The assistant never out-reaches the person it works for (issue 17, point 5): its grant
//! (read / write / risky) is checked on every call — by the tool runner and the confirmation
//! gate against the grant of the turn's start, and again by the planner's transaction helper
//! against the grant stored now — so a grant narrowed between two calls of one turn refuses the
//! second. The tools offered to the model stay byte-identical whatever the grant (frozen
//! prefix); a refused call gets a sentence the model can relay. Each on SQLite and on DynamoDB
//! (moto), through the one job path as the web chat runs it.

use async_trait::async_trait;
use backend::{BackendError, ChatModel, ChatRequest, EventStream, Reply, ScriptedModel};
use channel_jobs::ChannelJobs;
use engine::{ConfirmationGate, Engine, EngineOptions, NullSink, TurnOutcome, risk_policy};
use planner::{Caller, EventStatus, NewEvent, Planner};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Account, Store};
use tests::{web_job, web_jobs};
use tools::{Grant, Registry, not_allowed};
use transcript::{Conversation, ConversationId, Part, Role, UserId};

const USER: &str = "user-1";
const CONV: &str = "conv-1";

/// The scripted model, and the person changing their assistant's grant while the model works:
/// right before model call `n` (1-based, counted over the rig's life), the grant is set.
struct GrantChangedMidTurn {
    inner: Arc<ScriptedModel>,
    store: Arc<dyn Store>,
    calls: AtomicUsize,
    change: Mutex<Option<(usize, Grant)>>,
}

#[async_trait]
impl ChatModel for GrantChangedMidTurn {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let due = self.change.lock().unwrap().filter(|(at, _)| *at == n);
        if let Some((_, grant)) = due {
            self.store
                .set_assistant_grant(&UserId::from(USER), grant)
                .await
                .unwrap();
        }
        self.inner.stream(request).await
    }
}

struct Rig {
    /// How often the risk policy judged a call.
    assessed: Arc<AtomicUsize>,
    scripted: Arc<ScriptedModel>,
    model: Arc<GrantChangedMidTurn>,
    store: Arc<dyn Store>,
    jobs: ChannelJobs,
    planner: Arc<Planner>,
    sent: AtomicU32,
}

/// user-1 (default grant) in conv-1, the planner's tools behind the confirmation gate.
async fn rig(store: Arc<dyn Store>) -> Rig {
    store.put_account(&Account::new(USER, USER)).await.unwrap();
    let mut conv = Conversation::new(ConversationId::from(CONV), USER, "web", "planner");
    conv.created_at_ms = 1;
    store.create_conversation(&conv).await.unwrap();
    let now = Arc::new(AtomicI64::new(1_700_000_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let planner = Arc::new(Planner::new(store.clone()).with_clock(clock.clone()));
    let mut tools = Registry::default();
    planner::register(&mut tools, planner.clone(), &[planner::PURPOSE]).unwrap();
    let assessed = Arc::new(AtomicUsize::new(0));
    let policy = {
        let planner = planner.clone();
        let assessed = assessed.clone();
        risk_policy(move |ctx, tool, args| {
            let planner = planner.clone();
            assessed.fetch_add(1, Ordering::SeqCst);
            async move { planner.assess_risk(&ctx, &tool, &args).await }
        })
    };
    let gate = ConfirmationGate::new(Arc::new(policy), store.clone()).with_clock(clock);
    let scripted = Arc::new(ScriptedModel::new([]));
    let model = Arc::new(GrantChangedMidTurn {
        inner: scripted.clone(),
        store: store.clone(),
        calls: AtomicUsize::new(0),
        change: Mutex::new(None),
    });
    let options = EngineOptions {
        model_id: "test-model".into(),
        system_prompt: "You are Bridle's test assistant.".into(),
        ..EngineOptions::default()
    };
    let engine = Engine::new(model.clone(), Arc::new(tools), store.clone(), options)
        .with_confirmation(Arc::new(gate));
    let jobs = web_jobs(Arc::new(engine), store.clone(), now);
    Rig {
        assessed,
        scripted,
        model,
        store,
        jobs,
        planner,
        sent: AtomicU32::new(0),
    }
}

fn event(title: &str) -> Value {
    json!({"title": title, "starts_at": "2025-04-12T10:00", "venue": "Court 1", "capacity": 10})
}

/// user-1 acting directly, as the setup and the checks do.
fn owner() -> Caller {
    Caller::from_ctx(&tools::Ctx {
        user_id: UserId::from(USER),
        actor: tools::Actor::User,
        action_id: tools::ActionId("setup".into()),
        conversation_id: ConversationId::from(CONV),
        call_key: None,
        grant: Grant::Risky,
    })
}

impl Rig {
    async fn send(&self, text: &str) -> TurnOutcome {
        let n = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let job = web_job(CONV, USER, &format!("m{n}"), text);
        let ran = self
            .jobs
            .run_streamed(&job, Duration::from_secs(60), &NullSink)
            .await;
        ran.turn
            .unwrap_or_else(|| panic!("the turn did not run: {:?}", ran.outcome))
    }

    /// Spring Open, made and published by user-1 directly.
    async fn published_spring(&self) -> planner::Event {
        let spring = self
            .planner
            .create_event(
                &owner(),
                NewEvent {
                    title: "Spring Open".into(),
                    starts_at: "2025-04-12T10:00".into(),
                    venue: "Court 1".into(),
                    capacity: 10,
                },
            )
            .await
            .unwrap();
        self.planner
            .publish_event(&owner(), &spring.id)
            .await
            .unwrap();
        spring
    }

    async fn set_grant(&self, grant: Grant) {
        self.store
            .set_assistant_grant(&UserId::from(USER), grant)
            .await
            .unwrap();
    }

    /// The tool results of the conversation, by call id.
    async fn result(&self, call_id: &str) -> Value {
        let rows = self
            .store
            .messages(&ConversationId::from(CONV), 0)
            .await
            .unwrap();
        rows.iter()
            .filter(|m| m.role == Role::Tool)
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                Part::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } if tool_use_id == call_id => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result for {call_id}"))
    }

    async fn titles(&self) -> Vec<String> {
        let mut titles: Vec<String> = self
            .planner
            .list_events(&owner())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.title)
            .collect();
        titles.sort();
        titles
    }

    /// What every model request offered before the conversation: the system prompt and the
    /// tools, as bytes.
    fn prefixes(&self) -> Vec<Vec<u8>> {
        self.scripted
            .requests()
            .iter()
            .map(|r| serde_json::to_vec(&(&r.system, &r.tools)).unwrap())
            .collect()
    }
}

fn refusal(result: &Value) -> &str {
    result["error"].as_str().unwrap_or_default()
}

/// The grant narrowed to read between two calls of one turn: the first write ran, the second
/// is refused by the transaction helper (the turn's tools still carry the grant of its start)
/// with the readable sentence; the next turn's runner refuses writes at once and reads still
/// run. Every request, before and after, offered the same tools byte for byte.
async fn narrowed_between_two_calls(store: Arc<dyn Store>) {
    let r = rig(store).await;
    r.scripted
        .push(Reply::tool_call("c1", "create_event", event("Spring Open")));
    r.scripted
        .push(Reply::tool_call("c2", "create_event", event("Autumn Cup")));
    r.scripted
        .push(Reply::text("Your settings let me only read now."));
    // The person narrows it while the model writes its second call.
    *r.model.change.lock().unwrap() = Some((2, Grant::Read));
    let out = r.send("add Spring Open and Autumn Cup").await;
    assert_eq!(out.reply, "Your settings let me only read now.");
    assert!(
        r.result("c1").await.get("error").is_none(),
        "the first call ran"
    );
    let second = r.result("c2").await;
    assert_eq!(refusal(&second), not_allowed(Grant::Read));
    assert!(
        refusal(&second).starts_with(
            "Not allowed by your settings: this assistant may only read (change it in the web app)."
        ),
        "{second}"
    );
    assert_eq!(
        r.titles().await,
        ["Spring Open"],
        "the second wrote nothing"
    );

    // The next turn starts under the narrowed grant: refused before the planner is reached,
    // and a read still runs.
    r.scripted
        .push(Reply::tool_call("c3", "create_event", event("Winter Gala")));
    r.scripted
        .push(Reply::tool_call("c4", "list_events", json!({})));
    r.scripted.push(Reply::text("I can only read."));
    r.send("add Winter Gala").await;
    assert_eq!(refusal(&r.result("c3").await), not_allowed(Grant::Read));
    let listed = r.result("c4").await;
    assert!(listed.get("error").is_none(), "a read runs: {listed}");
    assert_eq!(r.titles().await, ["Spring Open"]);

    let prefixes = r.prefixes();
    assert_eq!(prefixes.len(), 6);
    assert!(
        prefixes.iter().all(|p| p == &prefixes[0]),
        "the tools offered never change with the grant"
    );
    let offered: Vec<String> = r.scripted.requests()[5]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(offered.contains(&"create_event".to_owned()), "{offered:?}");
}

/// Under `write`, changes run but a risky call (cancelling a published event) is refused
/// before anything is held: no confirmation asked, no buttons, nothing cancelled. Widened
/// back to `risky`, the same call is held for the person's yes as before.
async fn risky_needs_the_risky_grant(store: Arc<dyn Store>) {
    let r = rig(store).await;
    let spring = r.published_spring().await;
    r.set_grant(Grant::Write).await;

    r.scripted
        .push(Reply::tool_call("c1", "create_event", event("Autumn Cup")));
    r.scripted.push(Reply::tool_call(
        "c2",
        "cancel_event",
        json!({"event_id": spring.id}),
    ));
    r.scripted.push(Reply::text("I may not cancel it."));
    let out = r.send("add Autumn Cup and cancel Spring Open").await;
    assert!(
        r.result("c1").await.get("error").is_none(),
        "a plain write runs"
    );
    let risky = r.result("c2").await;
    assert_eq!(refusal(&risky), not_allowed(Grant::Write));
    assert!(
        refusal(&risky).starts_with(
            "Not allowed by your settings: this assistant may make changes, but not risky ones"
        ),
        "{risky}"
    );
    assert!(out.buttons.is_empty(), "nothing is held: {:?}", out.buttons);
    let events = r.planner.list_events(&owner()).await.unwrap();
    let status = |title: &str| {
        events
            .iter()
            .find(|e| e.title == title)
            .map(|e| e.status)
            .unwrap()
    };
    assert_eq!(status("Spring Open"), EventStatus::Published);

    r.set_grant(Grant::Risky).await;
    r.scripted.push(Reply::tool_call(
        "c3",
        "cancel_event",
        json!({"event_id": spring.id}),
    ));
    r.scripted.push(Reply::text("Shall I?"));
    let out = r.send("cancel Spring Open").await;
    assert!(
        refusal(&r.result("c3").await).starts_with("NOT EXECUTED: needs confirmation"),
        "under risky the call is held for a yes"
    );
    assert!(!out.buttons.is_empty(), "the held call offers Yes / No");
}

/// An undo is a change too: narrowed to read between creating an event and undoing it in one
/// turn, the undo is refused by the planner (which re-reads the grant) and the event stays.
async fn an_undo_after_narrowing_is_refused(store: Arc<dyn Store>) {
    let r = rig(store).await;
    r.scripted
        .push(Reply::tool_call("c1", "create_event", event("Spring Open")));
    r.scripted.push(Reply::tool_call("c2", "undo", json!({})));
    r.scripted.push(Reply::text("I may not undo it now."));
    *r.model.change.lock().unwrap() = Some((2, Grant::Read));
    r.send("add Spring Open, then undo it").await;
    assert_eq!(refusal(&r.result("c2").await), not_allowed(Grant::Read));
    assert_eq!(r.titles().await, ["Spring Open"], "nothing was undone");
}

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap())
}

async fn dynamo() -> Arc<dyn Store> {
    tests::moto::dynamo_store("grants").await
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

/// Under `read` a change is refused before the confirmation policy judges it (a judgement can
/// cost a scheduler's dry run): a steered model asking for sixteen cancellations and
/// re-plans costs no judgement, and nothing changes.
async fn a_change_outside_the_grant_is_not_judged(store: Arc<dyn Store>) {
    let r = rig(store).await;
    let spring = r.published_spring().await;
    r.set_grant(Grant::Read).await;
    let mut answer = Reply::new();
    for i in 0..16 {
        answer = match i % 2 {
            0 => answer.call(
                &format!("c{i}"),
                "cancel_event",
                json!({"event_id": spring.id}),
            ),
            _ => answer.call(
                &format!("c{i}"),
                "build_schedule",
                json!({"event_id": spring.id}),
            ),
        };
    }
    r.scripted
        .push(answer.stop(transcript::StopReason::ToolUse));
    r.scripted.push(Reply::text("I may not."));
    r.send("cancel it, and re-plan it, many times").await;
    for i in 0..16 {
        assert_eq!(
            refusal(&r.result(&format!("c{i}")).await),
            not_allowed(Grant::Read)
        );
    }
    assert_eq!(r.assessed.load(Ordering::SeqCst), 0, "nothing was judged");
    let events = r.planner.list_events(&owner()).await.unwrap();
    assert_eq!(events[0].status, EventStatus::Published);
}

on_both_stores!(
    a_change_outside_the_grant_is_not_judged,
    narrowed_between_two_calls,
    risky_needs_the_risky_grant,
    an_undo_after_narrowing_is_refused,
);
