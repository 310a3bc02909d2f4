//! Which planner calls need the user's confirmation, described from stored state.

use crate::{ATTENDEE, Attendee, Caller, EVENT, Event, EventStatus, Planner};
use serde_json::Value;
use tools::Ctx;

impl Planner {
    /// `Some(description)` for a risky call: cancelling a published event, withdrawing an
    /// attendee, or moving a published event to another date or venue. The description names
    /// what is stored (titles, names), not what the model typed. Calls on records the caller
    /// does not own are not risky here: they fail as not found when they run.
    pub async fn assess_risk(&self, ctx: &Ctx, tool: &str, args: &Value) -> Option<String> {
        let caller = Caller::from_ctx(ctx);
        let arg = |name: &str| args.get(name).and_then(Value::as_str);
        match tool {
            "cancel_event" => {
                let (event, _) = self
                    .owned::<Event>(&caller.user, EVENT, arg("event_id")?)
                    .await
                    .ok()?;
                (event.status == EventStatus::Published).then(|| {
                    format!(
                        "Cancel {} on {} ({} registered)",
                        event.title, event.starts_at, event.registered
                    )
                })
            }
            "withdraw_attendee" => {
                let (person, _) = self
                    .owned::<Attendee>(&caller.user, ATTENDEE, arg("attendee_id")?)
                    .await
                    .ok()?;
                let (event, _) = self
                    .owned::<Event>(&caller.user, EVENT, &person.event_id)
                    .await
                    .ok()?;
                Some(format!("Withdraw {} from {}", person.name, event.title))
            }
            "update_event" => {
                let (event, _) = self
                    .owned::<Event>(&caller.user, EVENT, arg("event_id")?)
                    .await
                    .ok()?;
                if event.status != EventStatus::Published {
                    return None;
                }
                let mut moves = Vec::new();
                if let Some(to) = arg("starts_at").filter(|to| *to != event.starts_at) {
                    moves.push(format!("from {} to {}", event.starts_at, to));
                }
                if let Some(to) = arg("venue").filter(|to| *to != event.venue) {
                    moves.push(format!("from {} to {}", event.venue, to));
                }
                (!moves.is_empty()).then(|| {
                    format!(
                        "Move {} (published, {} registered) {}",
                        event.title,
                        event.registered,
                        moves.join(" and ")
                    )
                })
            }
            _ => None,
        }
    }
}
