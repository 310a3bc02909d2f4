//! Which planner calls need the user's confirmation, described from stored state.

use crate::program::{PROGRAM, SCHEDULE, ScheduleRecord};
use crate::{ATTENDEE, Attendee, Caller, EVENT, Event, EventStatus, Planner, PlannerError};
use serde_json::Value;
use store::UndoScope;
use tools::Ctx;

impl Planner {
    /// `Some(description)` for a risky call: cancelling a published event or one with
    /// attendees, withdrawing an attendee, renaming a published event, moving it to another
    /// date or venue or lowering its capacity at all (to what is registered, registration
    /// shuts; above it, a registration or two more would shut it), registering someone for the
    /// last place of a published event (its registration shuts), publishing a full draft,
    /// re-planning the saved timetable of a published event, or changing what it shows (its
    /// days, rooms and breaks; a session's length), and an undo that would do any of these.
    /// The description names
    /// what is stored (titles, names), not what the model typed. Calls on records the caller
    /// does not own are not risky here: they fail as not found when they run. When storage
    /// fails, or a re-plan's dry run finds no plan place in time ([`PlannerError::Busy`]), what
    /// a call would change cannot be judged: the call is held (fail closed), as a risky one is.
    pub async fn assess_risk(&self, ctx: &Ctx, tool: &str, args: &Value) -> Option<String> {
        let risk = self.judged(ctx, tool, args).await;
        // What an MCP client is told may need a person's yes (`destructiveHint`) is every tool
        // this may hold.
        debug_assert!(
            risk.is_none() || crate::MAY_NEED_CONFIRMATION.contains(&tool),
            "{tool} is held but not in MAY_NEED_CONFIRMATION"
        );
        risk
    }

    async fn judged(&self, ctx: &Ctx, tool: &str, args: &Value) -> Option<String> {
        // Refused when it runs, before it changes anything: nothing to ask about.
        if crate::direction::marked_argument(args).is_some() {
            return None;
        }
        match self.assess(ctx, tool, args).await {
            Ok(risk) => risk,
            Err(err) => {
                tracing::warn!(error = %err, tool, "what the call would change could not be judged; held");
                let why = match err {
                    PlannerError::Busy => "Bridle was too busy planning other timetables just now",
                    _ => "the records could not be read just now",
                };
                Some(format!(
                    "Run {tool} now, without the usual check of what it changes ({why})"
                ))
            }
        }
    }

    async fn assess(
        &self,
        ctx: &Ctx,
        tool: &str,
        args: &Value,
    ) -> Result<Option<String>, PlannerError> {
        let caller = Caller::from_ctx(ctx);
        let arg = |name: &str| args.get(name).and_then(Value::as_str);
        Ok(match tool {
            // Cancelling is for good. A draft nobody registered for costs nothing to lose; one
            // with attendees is held as withdrawing one of them is. The question names what
            // tells the event from a look-alike a model could make (its status and venue), as
            // a withdrawal names the person's email.
            "cancel_event" => {
                self.event_for(&caller, arg("event_id"))
                    .await?
                    .and_then(|(event, _)| {
                        (event.status == EventStatus::Published || event.registered > 0).then(
                            || {
                                format!(
                                    "Cancel {} ({}, {} at {}, {} registered)",
                                    one_line(&event.title),
                                    event.status.as_str(),
                                    event.starts_at,
                                    one_line(&event.venue),
                                    event.registered
                                )
                            },
                        )
                    })
            }
            // The last place of a published event, taken, shuts its registration to everyone
            // else, as lowering its capacity to what is registered does.
            "register_attendee" => {
                let Some((event, _)) = self.event_for(&caller, arg("event_id")).await? else {
                    return Ok(None);
                };
                (event.status == EventStatus::Published
                    && event.registered.saturating_add(1) == event.capacity)
                    .then(|| {
                        format!(
                            "Register {} ({}) for the last place of {} (published, {} of {} registered): its registration then closes",
                            whole_line(arg("name").unwrap_or_default()),
                            whole_line(arg("email").unwrap_or_default()),
                            one_line(&event.title),
                            event.registered,
                            event.capacity
                        )
                    })
            }
            // A draft filled before it is published (registering for a draft is no risky call)
            // would open to the public already shut.
            "publish_event" => self
                .event_for(&caller, arg("event_id"))
                .await?
                .and_then(|(event, _)| {
                    (event.status == EventStatus::Draft && event.registered >= event.capacity)
                        .then(|| {
                            format!(
                                "Publish {} full ({} of {} registered): its registration opens shut",
                                one_line(&event.title),
                                event.registered,
                                event.capacity
                            )
                        })
                }),
            "withdraw_attendee" => {
                let Some(id) = arg("attendee_id") else {
                    return Ok(None);
                };
                let Some((person, _)) =
                    found(self.owned::<Attendee>(&caller.user, ATTENDEE, id).await)?
                else {
                    return Ok(None);
                };
                // The event is told from a look-alike a model could make (a draft of the same
                // title, with the same person registered) as a cancellation's is.
                self.event_for(&caller, Some(&person.event_id))
                    .await?
                    .map(|(event, _)| {
                        format!(
                            "Withdraw {} ({}) from {} ({}, {} at {})",
                            one_line(&person.name),
                            one_line(&person.email),
                            one_line(&event.title),
                            event.status.as_str(),
                            event.starts_at,
                            one_line(&event.venue)
                        )
                    })
            }
            "update_event" => {
                let Some((event, _)) = self.event_for(&caller, arg("event_id")).await? else {
                    return Ok(None);
                };
                if event.status != EventStatus::Published {
                    return Ok(None);
                }
                let mut moves = Vec::new();
                if let Some(to) = arg("starts_at").filter(|to| *to != event.starts_at) {
                    moves.push(format!("from {} to {}", event.starts_at, to));
                }
                if let Some(to) = arg("venue").filter(|to| *to != event.venue) {
                    moves.push(format!("from {} to {}", one_line(&event.venue), whole_line(to)));
                }
                let mut changes = Vec::new();
                if !moves.is_empty() {
                    changes.push(format!(
                        "Move {} (published, {} registered) {}",
                        one_line(&event.title),
                        event.registered,
                        moves.join(" and ")
                    ));
                }
                // Its title is what people registered for see: renamed ("CANCELLED — do not
                // come"), it tells them something the owner may never have said.
                if let Some(to) = arg("title").filter(|to| *to != event.title) {
                    let to = whole_line(to);
                    changes.push(match changes.is_empty() {
                        true => format!(
                            "Rename {} (published, {} registered) to \u{201c}{to}\u{201d}",
                            one_line(&event.title),
                            event.registered
                        ),
                        false => format!("rename it to \u{201c}{to}\u{201d}"),
                    });
                }
                // A capacity lowered to what is registered shuts registration to everyone else;
                // lowered at all, it leaves fewer places, which registrations before the last
                // one (no risky calls) can then fill: so any lowering waits for a yes.
                if let Some(to) = args.get("capacity").and_then(Value::as_u64)
                    && to < u64::from(event.capacity)
                {
                    changes.push(if to <= u64::from(event.registered) {
                        format!(
                            "Close registration for {} (published): capacity from {} to {to}, with {} registered",
                            one_line(&event.title),
                            event.capacity,
                            event.registered
                        )
                    } else {
                        format!(
                            "Lower the capacity of {} (published, {} registered) from {} to {to}",
                            one_line(&event.title),
                            event.registered,
                            event.capacity
                        )
                    });
                }
                if changes.is_empty() {
                    return Ok(None);
                }
                // What else the call changes rides on the same yes: the question names it too.
                let mut riders = Vec::new();
                if let Some(to) = args.get("capacity").and_then(Value::as_u64)
                    && to > u64::from(event.capacity)
                {
                    riders.push(format!("its capacity to {to} (from {})", event.capacity));
                }
                Some(format!("{}{}", changes.join("; "), also(&riders)))
            }
            // Undoing is a change like any other: what it would revert passes the same policy.
            // Only this conversation's actions are in reach, and only they are read.
            "undo" => {
                let here = UndoScope::Conversation(ctx.conversation_id.clone());
                let rows = match self.store.next_undo(&caller.user, &here).await {
                    Ok(rows) => rows,
                    Err(err) => {
                        // Fail closed: what the undo would do cannot be read, so it waits.
                        tracing::warn!(error = %err, "undo stack unreadable; undo held");
                        return Ok(Some(
                            "Undo the last change made in this conversation".into(),
                        ));
                    }
                };
                // What the undo does to each record: from what the action's last change left
                // back to what its first found (created, then published: deleted), as it runs.
                let net: Vec<store::Change> = store::reverting_changes(&rows)
                    .into_iter()
                    .map(|c| store::Change {
                        before: c.after,
                        after: c.before,
                        ..c
                    })
                    .collect();
                let mut effects: Vec<String> = Vec::new();
                for change in &net {
                    let Some(mut effect) = undo_effect(change) else {
                        continue;
                    };
                    // A withdrawal names its event as a withdraw_attendee question does: a
                    // look-alike draft of the same title reads differently.
                    if change.kind == ATTENDEE
                        && let Some(who) = change
                            .after
                            .clone()
                            .or_else(|| change.before.clone())
                            .and_then(|v| serde_json::from_value::<Attendee>(v).ok())
                        && let Some((event, _)) =
                            self.event_for(&caller, Some(&who.event_id)).await?
                    {
                        effect = format!(
                            "{effect} from {} ({}, {} at {})",
                            one_line(&event.title),
                            event.status.as_str(),
                            event.starts_at,
                            one_line(&event.venue)
                        );
                    }
                    effects.push(effect);
                }
                // A re-plan's timetable, put back: its sessions move as a re-plan's do.
                for change in net.iter().filter(|c| c.kind == SCHEDULE) {
                    if let Some(effect) = self.replan_undo_effect(&caller, change).await?
                        && !effects.contains(&effect)
                    {
                        effects.push(effect);
                    }
                }
                // A program a published timetable is drawn from, put back: what the timetable
                // shows changes as a program edit's would.
                for change in net.iter().filter(|c| c.kind == PROGRAM) {
                    if let Some(event) = self.published_timetable(&caller, &change.id).await?
                        && let effect = format!(
                            "put the program of the published timetable of \u{201c}{}\u{201d} back as it was",
                            one_line(&event.title)
                        )
                        && !effects.contains(&effect)
                    {
                        effects.push(effect);
                    }
                }
                // The question names the change by its number in the owner's records: a yes is
                // for that change, so one made after the question (another "Dana Lee"
                // registered, described alike) reads as another question, and is not undone on
                // it.
                let number = rows.last().map(|row| row.seq).unwrap_or_default();
                (!effects.is_empty()).then(|| {
                    format!(
                        "Undo the last change made in this conversation (change #{number}), which would {}",
                        effects.join("; ")
                    )
                })
            }
            // What a published timetable shows is drawn from the program as it is now: new
            // days, rooms or breaks, or a session's new length, change it at once (no re-plan).
            "set_rooms" => self
                .published_timetable(&caller, arg("event_id").unwrap_or_default())
                .await?
                .map(|event| {
                    format!(
                        "Replace the days, rooms and breaks of the published timetable of \u{201c}{}\u{201d} with {}",
                        one_line(&event.title),
                        new_layout(args)
                    )
                }),
            // A session's new length moves what follows it; its new title, track and speakers
            // are what people see (renamed "CANCELLED", as an event's title can be; a speaker
            // "Cancelled – go home").
            "edit_session" => {
                let duration = args.get("duration").and_then(Value::as_u64);
                let title = arg("title");
                let shown = ["title", "track", "speakers"]
                    .iter()
                    .any(|name| args.get(*name).is_some_and(|v| !v.is_null()));
                if duration.is_none() && !shown {
                    return Ok(None);
                }
                let Some(event) = self
                    .published_timetable(&caller, arg("event_id").unwrap_or_default())
                    .await?
                else {
                    return Ok(None);
                };
                let Some((record, _)) =
                    found(self.program_of(&caller, &event.id).await)?
                else {
                    return Ok(None);
                };
                let Some(session) = record.program.session(arg("session_id").unwrap_or_default())
                else {
                    return Ok(None);
                };
                let longer = duration.filter(|d| *d != u64::from(session.duration));
                let renamed = title.filter(|to| *to != session.title);
                match (longer, renamed) {
                    (Some(duration), _) => Some(format!(
                        "Change \u{201c}{}\u{201d} in the published timetable of \u{201c}{}\u{201d} from {} to {duration} minutes{}",
                        one_line(&session.title),
                        one_line(&event.title),
                        session.duration,
                        also(&session_riders(session, args, true))
                    )),
                    (None, Some(to)) => Some(format!(
                        "Rename \u{201c}{}\u{201d} in the published timetable of \u{201c}{}\u{201d} to \u{201c}{}\u{201d}{}",
                        one_line(&session.title),
                        one_line(&event.title),
                        whole_line(to),
                        also(&session_riders(session, args, false))
                    )),
                    (None, None) => {
                        // Compared as they would be kept (`program::one_name`).
                        use crate::program::one_name;
                        let track = arg("track")
                            .map(one_name)
                            .filter(|to| Some(to.as_str()) != session.track.as_deref());
                        let speakers = args
                            .get("speakers")
                            .and_then(Value::as_array)
                            .map(|items| {
                                items
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(one_name)
                                    .collect::<Vec<_>>()
                            })
                            .filter(|to| *to != session.speakers);
                        (track.is_some() || speakers.is_some()).then(|| {
                            format!(
                                "Change \u{201c}{}\u{201d} in the published timetable of \u{201c}{}\u{201d}: set {}",
                                one_line(&session.title),
                                one_line(&event.title),
                                session_riders(session, args, false).join(", ")
                            )
                        })
                    }
                }
            }
            // Re-planning a published program moves sessions people may have planned around:
            // a dry run counts how many would move.
            "build_schedule" | "move_session" => {
                let Some(event_id) = arg("event_id") else {
                    return Ok(None);
                };
                let pin = match tool {
                    "move_session" => match crate::program_tools::move_pin(args) {
                        Some(pin) => Some(pin),
                        None => return Ok(None),
                    },
                    _ => None,
                };
                let pin = pin
                    .as_ref()
                    .map(|(s, at, room)| (s.as_str(), *at, room.clone()));
                let Some(run) = self.dry_run(&caller, event_id, pin).await? else {
                    return Ok(None);
                };
                // A pin is named with where it goes: the yes is for that too. A move begins
                // with its action, as the user asked it ("yes, move it" names it).
                let pinned = run.pinned.as_deref().map(|title| {
                    let room = arg("room")
                        .filter(|r| !r.is_empty())
                        .map(|r| format!(" in \u{201c}{}\u{201d}", one_line(r)))
                        .unwrap_or_default();
                    format!(
                        "\u{201c}{}\u{201d} to day {} at {}{room}",
                        one_line(title),
                        args.get("day").and_then(Value::as_u64).unwrap_or_default(),
                        one_line(arg("time").unwrap_or_default()),
                    )
                });
                let program = one_line(&run.title);
                let moved = what_moves(&run.moved);
                Some(match pinned {
                    Some(pin) => format!(
                        "Move {pin}, re-planning the published program of \u{201c}{program}\u{201d}: {moved}"
                    ),
                    None => format!(
                        "Re-plan the published program of \u{201c}{program}\u{201d}: {moved}"
                    ),
                })
            }
            _ => None,
        })
    }
}

/// A read for an assessment: `None` when the record is not there, not the caller's or not in
/// a state the call could change (the call then fails on its own when it runs, and nothing
/// needs a yes); an error only when storage failed.
pub(crate) fn found<T>(read: Result<T, PlannerError>) -> Result<Option<T>, PlannerError> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(err @ PlannerError::Store(_)) => Err(err),
        Err(_) => Ok(None),
    }
}

impl Planner {
    /// The caller's event `event_id` when it is published and has a saved timetable (which
    /// people see), as an assessment reads it ([`found`]).
    async fn published_timetable(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Option<Event>, PlannerError> {
        let Some((event, _)) = self.event_for(caller, Some(event_id)).await? else {
            return Ok(None);
        };
        if event.status != EventStatus::Published {
            return Ok(None);
        }
        let saved = found(
            self.maybe::<ScheduleRecord>(caller, SCHEDULE, event_id)
                .await,
        )?
        .flatten();
        Ok(saved.map(|_| event))
    }

    /// The caller's event `id` as an assessment reads it ([`found`]).
    async fn event_for(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Option<(Event, Value)>, PlannerError> {
        match id {
            Some(id) => found(self.owned::<Event>(&caller.user, EVENT, id).await),
            None => Ok(None),
        }
    }

    /// What reverting a saved timetable (`change`, of kind [`SCHEDULE`]) would do that needs
    /// a yes: move the sessions of a published program back, or take its timetable away, as
    /// re-planning a published program needs one ([`Planner::assess_risk`]). Read from the
    /// event as stored now.
    async fn replan_undo_effect(
        &self,
        caller: &Caller,
        change: &store::Change,
    ) -> Result<Option<String>, PlannerError> {
        let Some((event, _)) = found(self.owned::<Event>(&caller.user, EVENT, &change.id).await)?
        else {
            return Ok(None);
        };
        if event.status != EventStatus::Published {
            return Ok(None);
        }
        Ok(Some(match change.before {
            Some(_) => format!(
                "put the published program of \u{201c}{}\u{201d} back as it was before its last re-plan",
                one_line(&event.title)
            ),
            None => format!(
                "take away the timetable of the published program of \u{201c}{}\u{201d}",
                one_line(&event.title)
            ),
        }))
    }
}

/// What reverting `change` (back to its `before`) would do that needs a yes: delete, unpublish,
/// rename or move a published event, lower its capacity or take its last place back, or
/// withdraw an attendee. Read from the action's audit rows, one net change per record.
fn undo_effect(change: &store::Change) -> Option<String> {
    match change.kind.as_str() {
        EVENT => {
            let now: Event = serde_json::from_value(change.after.clone()?).ok()?;
            if now.status == EventStatus::Cancelled {
                // A cancellation undone opens the event to the public again, people who were
                // told it is off included: as a yes was asked to cancel it, one is to reopen it.
                let before: Event = serde_json::from_value(change.before.clone()?).ok()?;
                return (before.status == EventStatus::Published).then(|| {
                    format!(
                        "reopen the cancelled event {} (published again, {} registered)",
                        one_line(&now.title),
                        before.registered
                    )
                });
            }
            if now.status != EventStatus::Published {
                return None;
            }
            let Some(before) = &change.before else {
                return Some(format!(
                    "delete the published event {} ({} registered)",
                    one_line(&now.title),
                    now.registered
                ));
            };
            let before: Event = serde_json::from_value(before.clone()).ok()?;
            if before.status != EventStatus::Published {
                return Some(format!("unpublish {}", one_line(&now.title)));
            }
            let mut effects = Vec::new();
            if before.title != now.title {
                effects.push(format!(
                    "rename the published event {} back to \u{201c}{}\u{201d}",
                    one_line(&now.title),
                    one_line(&before.title)
                ));
            }
            if before.starts_at != now.starts_at || before.venue != now.venue {
                effects.push(format!(
                    "move the published event {} back to {} at {}",
                    one_line(&now.title),
                    before.starts_at,
                    one_line(&before.venue)
                ));
            }
            if before.capacity < now.capacity {
                // Its capacity going back down leaves fewer places (or none), as lowering it
                // does.
                effects.push(format!(
                    "lower the capacity of the published event {} back to {} ({} registered)",
                    one_line(&now.title),
                    before.capacity,
                    now.registered
                ));
            } else if before.registered > now.registered && before.registered >= before.capacity {
                // A withdrawal undone that takes its last place back shuts its registration, as
                // registering for the last place does.
                effects.push(format!(
                    "take back the last place of the published event {} ({} of {} registered), closing its registration",
                    one_line(&now.title),
                    now.registered,
                    now.capacity
                ));
            }
            (!effects.is_empty()).then(|| effects.join("; "))
        }
        ATTENDEE if change.before.is_none() => {
            let who: Attendee = serde_json::from_value(change.after.clone()?).ok()?;
            Some(format!(
                "withdraw {} ({})",
                one_line(&who.name),
                one_line(&who.email)
            ))
        }
        _ => None,
    }
}

/// The other changes a held call makes, as its question ends: "" when there are none, else
/// ", and also set its title to …, …". A yes is for the whole call, so the question names all
/// of what it changes, not only what made it risky.
fn also(riders: &[String]) -> String {
    match riders {
        [] => String::new(),
        _ => format!(", and also set {}", riders.join(", ")),
    }
}

/// What an `edit_session` call changes besides the session's length (and, unless `with_title`
/// is false, when its question already names the new title, besides its title), from its arguments,
/// compared with the stored session where the two are alike (a room is named in the call and
/// stored by id, a fixed start given as a day and a time: those are named whenever given).
fn session_riders(
    session: &schedule_types::Session,
    args: &Value,
    with_title: bool,
) -> Vec<String> {
    let text = |name: &str| args.get(name).and_then(Value::as_str);
    let names = |name: &str| {
        args.get(name).and_then(Value::as_array).map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
    };
    let mut riders = Vec::new();
    if let Some(to) = text("title").filter(|to| with_title && *to != session.title) {
        riders.push(format!("its title to \u{201c}{}\u{201d}", whole_line(to)));
    }
    use crate::program::one_name;
    if let Some(to) = text("track")
        .map(one_name)
        .filter(|to| Some(to.as_str()) != session.track.as_deref())
    {
        riders.push(format!("its track to \u{201c}{}\u{201d}", whole_line(&to)));
    }
    if let Some(to) = names("speakers")
        .map(|to| to.iter().map(|s| one_name(s)).collect::<Vec<_>>())
        .filter(|to| *to != session.speakers)
    {
        riders.push(format!("its speakers to {}", every_name(&to)));
    }
    if let Some(to) = args
        .get("audience")
        .and_then(Value::as_u64)
        .filter(|to| *to != u64::from(session.audience))
    {
        riders.push(format!("its expected audience to {to}"));
    }
    if let Some(at) = args.get("at").filter(|at| !at.is_null()) {
        let day = at.get("day").and_then(Value::as_u64).unwrap_or_default();
        let time = at.get("time").and_then(Value::as_str).unwrap_or_default();
        riders.push(format!("its start to day {day} at {}", whole_line(time)));
    }
    if let Some(room) = text("room") {
        riders.push(format!("its room to \u{201c}{}\u{201d}", whole_line(room)));
    }
    if let Some(after) = names("after").filter(|to| *to != session.after) {
        riders.push(format!("the sessions it must follow ({})", after.len()));
    }
    riders
}

/// What a `set_rooms` call sets, as its question shows it (a yes is for the whole call): its
/// days with their hours, its rooms with their seats, its breaks with their day and times, every
/// one of each (the published timetable shows them all: none hides behind "and 1 more").
fn new_layout(args: &Value) -> String {
    let items = |name: &str| {
        args.get(name)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let text = |item: &Value, field: &str| whole_line(item[field].as_str().unwrap_or_default());
    let days: Vec<String> = items("days")
        .iter()
        .map(|d| format!("{}\u{2013}{}", text(d, "start"), text(d, "end")))
        .collect();
    let rooms: Vec<String> = items("rooms")
        .iter()
        .map(|r| {
            let seats = r["capacity"].as_u64().unwrap_or_default();
            let noun = if seats == 1 { "seat" } else { "seats" };
            format!("\u{201c}{}\u{201d} ({seats} {noun})", text(r, "name"))
        })
        .collect();
    let breaks: Vec<String> = items("breaks")
        .iter()
        .map(|b| {
            let length = match b["duration"].as_u64() {
                Some(minutes) => format!(" ({minutes} min)"),
                None => String::new(),
            };
            format!(
                "\u{201c}{}\u{201d} on day {} {}\u{2013}{}{length}",
                text(b, "name"),
                b["day"].as_u64().unwrap_or_default(),
                text(b, "from"),
                text(b, "to"),
            )
        })
        .collect();
    let count = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let breaks = match breaks.is_empty() {
        true => "no breaks".to_owned(),
        false => format!("breaks {}", breaks.join(", ")),
    };
    format!(
        "{} ({}), {} ({}), and {breaks}",
        count(days.len(), "day", "days"),
        days.join(", "),
        count(rooms.len(), "room", "rooms"),
        rooms.join(", "),
    )
}

/// Names a yes would store, as a question lists them: every one, quoted and whole (no part of
/// what a yes sets hides behind a cut or "and 1 more"); "none" for none.
fn every_name(names: &[String]) -> String {
    match names.is_empty() {
        true => "none".to_owned(),
        false => names
            .iter()
            .map(|n| format!("\u{201c}{}\u{201d}", whole_line(n)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Names as a question lists them: the first [`NAMES_SHOWN`] quoted, then how many more;
/// "none" for none.
fn quoted(names: &[String]) -> String {
    let named: Vec<String> = names
        .iter()
        .take(NAMES_SHOWN)
        .map(|n| format!("\u{201c}{}\u{201d}", one_line(n)))
        .collect();
    match names.len().saturating_sub(NAMES_SHOWN) {
        _ if names.is_empty() => "none".to_owned(),
        0 => named.join(", "),
        more => format!("{}, and {more} more", named.join(", ")),
    }
}

/// How many names a question shows (moving sessions, speakers); the rest are counted.
const NAMES_SHOWN: usize = 3;

/// The sessions a re-plan moves, as its question says it: "no session moves", or how many and
/// which (the first [`NAMES_SHOWN`] by title, then how many more).
fn what_moves(titles: &[String]) -> String {
    let which = quoted(titles);
    match titles.len() {
        0 => "no session moves".to_owned(),
        1 => format!("1 session moves ({which})"),
        n => format!("{n} sessions move ({which})"),
    }
}

/// How long a name may run in a question to the user.
const NAME_CHARS: usize = 80;

/// A stored name (a title, a person's name) as a question to the user shows it: on one line,
/// spaces collapsed, double quotation marks made single, cut at [`NAME_CHARS`]. Names are
/// typed by the model through tools that need no yes; a line break or a quotation mark in one
/// must not let it write the question's own words (a made-up "If you say yes: nothing is
/// lost").
pub fn one_line(name: &str) -> String {
    let joined = flattened(name);
    match joined.char_indices().nth(NAME_CHARS) {
        Some((cut, _)) => format!("{}\u{2026}", &joined[..cut]),
        None => joined,
    }
}

/// A value the call would store (a new title, venue, name or email) as its question shows it:
/// on one line as [`one_line`] makes it, but whole (the tool's schema bounds its length), so no
/// part of what a yes sets hides behind a cut.
pub(crate) fn whole_line(value: &str) -> String {
    flattened(value)
}

/// `text` on one line: spaces collapsed, double quotation marks made single, invisible
/// formatting characters dropped.
fn flattened(text: &str) -> String {
    let visible: String = text
        .chars()
        .filter(|c| !transcript::is_invisible_format(*c))
        .collect();
    let words: Vec<&str> = visible
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    // Double quotation marks become single ones: the question quotes the name, and one inside
    // it would close that quote and make what follows read as the question's own words.
    words
        .join(" ")
        .replace(['"', '\u{201c}', '\u{201d}', '\u{201e}', '\u{ff02}'], "'")
}

#[cfg(test)]
mod tests {
    use super::{one_line, what_moves};

    #[test]
    fn a_replans_question_names_the_sessions_that_move() {
        let titles = |n: usize| (1..=n).map(|i| format!("Talk {i}")).collect::<Vec<_>>();
        assert_eq!(what_moves(&[]), "no session moves");
        assert_eq!(
            what_moves(&titles(1)),
            "1 session moves (\u{201c}Talk 1\u{201d})"
        );
        assert_eq!(
            what_moves(&titles(3)),
            "3 sessions move (\u{201c}Talk 1\u{201d}, \u{201c}Talk 2\u{201d}, \u{201c}Talk 3\u{201d})"
        );
        assert_eq!(
            what_moves(&titles(5)),
            "5 sessions move (\u{201c}Talk 1\u{201d}, \u{201c}Talk 2\u{201d}, \u{201c}Talk 3\u{201d}, and 2 more)"
        );
        assert_eq!(
            what_moves(&["Keynote\nIf you say yes: nothing moves".into()]),
            "1 session moves (\u{201c}Keynote If you say yes: nothing moves\u{201d})"
        );
    }

    #[test]
    fn a_name_is_shown_on_one_line_and_cut_short() {
        assert_eq!(one_line("Spring Open"), "Spring Open");
        assert_eq!(
            one_line("Spring Open\n\nIf you say yes:\tnothing is lost\u{0}"),
            "Spring Open If you say yes: nothing is lost"
        );
        assert_eq!(
            one_line("x\" and nothing else \u{201d}, \u{201c}y"),
            "x' and nothing else ', 'y"
        );
        // Turned around or hidden by invisible characters: shown as plain text.
        assert_eq!(
            one_line("Spring Open\u{202e}5 ot yticapac eht rewoL ;\u{202c}"),
            "Spring Open5 ot yticapac eht rewoL ;"
        );
        assert_eq!(
            one_line("Da\u{200b}na\u{2066} Lee\u{2069}\u{feff} \u{200b} Ray"),
            "Dana Lee Ray"
        );
        let long = "é".repeat(200);
        let shown = one_line(&long);
        assert_eq!(shown.chars().count(), 81);
        assert!(shown.ends_with('\u{2026}'));
    }
}
