//! Turns under the standard budget guards, for the budget tests: the guards, and for the tests
//! that race one user's ("ana") turns against a cap (`budget_concurrency.rs`,
//! `budget_parallel_turns.rs`) the engine, the conversations `c00`, `c01`, … and each one's
//! message.

use crate::{Calls, sample_tools};
use backend::ScriptedModel;
use budget::{BudgetConfig, Guards, InMemoryAccounts, StandardGuards};
use engine::{Engine, EngineOptions, TurnInput};
use std::sync::Arc;
use store::Store;
use tools::ActionId;
use transcript::Conversation;

/// The guards' clock: every turn runs at this instant, mid-minute and mid-hour, so no window
/// rolls over during a test.
pub const NOW: i64 = 1_800_000_030_000;

/// The standard guards with `ledger` as their ledger, at [`NOW`], every account active.
pub fn guards(ledger: Arc<dyn Store>, config: BudgetConfig) -> Guards {
    Guards::standard(StandardGuards {
        ledger,
        config: Arc::new(config),
        accounts: Arc::new(InMemoryAccounts::default()),
        clock: Arc::new(|| NOW),
        no_model: None,
    })
}

/// The engine with [`guards`] over `store`, for the model `test-model`.
pub fn engine(store: Arc<dyn Store>, model: Arc<ScriptedModel>, config: BudgetConfig) -> Engine {
    let guards = guards(store.clone(), config);
    Engine::new(
        model,
        Arc::new(sample_tools(Calls::default())),
        store,
        EngineOptions {
            model_id: "test-model".into(),
            ..EngineOptions::default()
        },
    )
    .with_guard(Arc::new(guards))
}

/// `n` web conversations of ana's, `c00` onwards.
pub async fn conversations(store: &dyn Store, n: usize) {
    for i in 0..n {
        let conv = Conversation::new(format!("c{i:02}"), "ana", "web", "planner");
        store.create_conversation(&conv).await.unwrap();
    }
}

/// The message of conversation `i`'s turn.
pub fn turn_input(i: usize) -> TurnInput {
    TurnInput {
        sent_at_ms: None,
        typed_yes: engine::TypedYes::Confirms,
        conversation_id: format!("c{i:02}").into(),
        text: "plan my week".into(),
        action_id: ActionId(format!("a{i:02}")),
        attachments: Vec::new(),
        attachment_notes: Vec::new(),
        button_id: None,
    }
}
