//! What a platform bills for a reply (SMS segments) is charged once for every piece that went
//! out, whatever ends the attempt: the pieces an attempt sent before its deadline cut it off
//! are charged before the attempt returns (a Lambda function answers its batch then, and may
//! be frozen with anything still running), and its retry, which sends only the rest, charges
//! only the rest.

use backend::{Reply, ScriptedModel};
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{Denied, Engine, EngineOptions, Guard, GuardCall, Permit};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Identities;
use store_sqlite::SqliteStore;
use tools::Registry;
use transcript::{ConversationId, UserId};

/// Lets every call through and keeps every charge of segments, each written a moment after
/// it is asked for (as a ledger write over the network is).
#[derive(Default)]
struct Charges(Mutex<Vec<(Option<UserId>, ConversationId, u32)>>);

const WRITE_TAKES: Duration = Duration::from_millis(300);

#[async_trait::async_trait]
impl Guard for Charges {
    async fn before_model_call(&self, _call: &GuardCall<'_>) -> Result<Permit, Denied> {
        Ok(Permit::default())
    }

    async fn charge_segments(
        &self,
        user: Option<&UserId>,
        conversation: &ConversationId,
        segments: u32,
    ) {
        tokio::time::sleep(WRITE_TAKES).await;
        let charge = (user.cloned(), conversation.clone(), segments);
        self.0.lock().unwrap().push(charge);
    }
}

impl Charges {
    fn segments(&self) -> Vec<u32> {
        self.0.lock().unwrap().iter().map(|c| c.2).collect()
    }
}

/// A text platform of 1,000 characters a message, each billed as one segment per started
/// 100 characters; while `stall` is set, it takes the first piece of a reply and never answers
/// for the next.
#[derive(Default)]
struct Texts {
    sent: Mutex<Vec<String>>,
    stall: AtomicBool,
}

#[async_trait::async_trait]
impl Sender for Texts {
    fn max_chars(&self) -> usize {
        1_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    fn billed_segments(&self, piece: &str) -> u32 {
        piece.chars().count().div_ceil(100) as u32
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        let pieces = channels::split::split(&reply.text, 1_000);
        for (_, piece) in sent.rest(&pieces) {
            if !sent.pieces.is_empty() && self.stall.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            self.sent.lock().unwrap().push(piece.clone());
            sent.pieces.push(piece.clone());
        }
        Ok(())
    }
}

#[tokio::test]
async fn pieces_sent_before_the_deadline_are_charged_once_and_the_retry_charges_the_rest() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let charges = Arc::new(Charges::default());
    let paragraph = |c: char| c.to_string().repeat(900);
    let answer = format!("{}\n\n{}", paragraph('a'), paragraph('b'));
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(vec![Reply::text(&answer)])),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    )
    .with_guard(charges.clone());
    let texts = Arc::new(Texts::default());
    texts.stall.store(true, Ordering::SeqCst);
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("generic".into(), texts.clone());
    let jobs = ChannelJobs {
        engine: Arc::new(engine),
        store: store.clone(),
        senders,
        options: JobOptions {
            metrics: metrics::Metrics::off(),
            ..JobOptions::default()
        },
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    store
        .bind_identity("generic", "ana", &"ana".into(), now)
        .await
        .unwrap();
    let job = TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "generic".into(),
        message_id: "m-1".into(),
        conversation_key: "c-1".into(),
        external_user_id: "ana".into(),
        text: "tell me all".into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    };

    // The second piece never gets an answer: the deadline cuts the attempt off, and the
    // first piece's charge is written by the time the attempt returns.
    let outcome = jobs.run(&job, Duration::from_secs(2)).await;
    assert!(matches!(outcome, JobOutcome::Failed(_)), "{outcome:?}");
    assert_eq!(texts.sent.lock().unwrap().len(), 1);
    assert_eq!(charges.segments(), [9]);

    // The retry sends the second piece only, and charges it only.
    texts.stall.store(false, Ordering::SeqCst);
    assert_eq!(
        jobs.run(&job, Duration::from_secs(10)).await,
        JobOutcome::Done
    );
    assert_eq!(texts.sent.lock().unwrap().len(), 2);
    assert_eq!(charges.segments(), [9, 9]);
    let charged = charges.0.lock().unwrap().clone();
    assert!(
        charged.iter().all(
            |(user, conversation, _)| user.as_ref().map(|u| u.0.as_str()) == Some("ana")
                && conversation.0 == "generic:c-1@ana"
        ),
        "{charged:?}"
    );
}
