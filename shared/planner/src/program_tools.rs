//! The tools for an event's program: set rooms, add and edit sessions, build, move and show
//! the timetable. Thin: parse arguments (times as `HH:MM`), call one service, answer short.

use crate::grid::with_refresh;
use crate::program::{NewSession, SessionChanges};
use crate::timetable::minutes;
use crate::{Caller, Planner};
use schedule_types::{Break, Day, Room, Slot, Window};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use tools::{Ctx, Registry, RegistryError, ToolDef, ToolError, handler_fn};

const CLOCK: &str = "^\\d{1,2}:\\d{2}$";

/// Register the program tools, offered for `purposes`.
pub(crate) fn register(
    registry: &mut Registry,
    planner: Arc<Planner>,
    purposes: &[&str],
) -> Result<(), RegistryError> {
    for (def, op) in defs() {
        let planner = planner.clone();
        let changes = !def.read_only;
        registry.register(
            def.purposes(purposes),
            handler_fn(move |ctx: Ctx, args: Value| {
                let planner = planner.clone();
                async move {
                    crate::direction::refused(&args)?;
                    let event = args
                        .get("event_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let output = op.run(&planner, &ctx, args).await?;
                    Ok(match changes {
                        true => with_refresh(output, event.as_deref()),
                        false => output,
                    })
                }
            }),
        )?;
    }
    Ok(())
}

fn defs() -> Vec<(ToolDef, Op)> {
    let id = |what: &str| json!({"type": "string", "minLength": 1, "maxLength": 200, "description": what});
    let time = |what: &str| json!({"type": "string", "pattern": CLOCK, "description": what});
    let day = json!({"type": "integer", "minimum": 1, "maximum": 31, "description": "Day of the event, 1 for the first"});
    let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
    // Every name and list is capped: a program is one record that each edit rewrites (and its
    // undo keeps before and after), so its size is what every later call pays for.
    let name = |max: usize| json!({"type": "string", "minLength": 1, "maxLength": max});
    let span = object(
        json!({"day": day, "from": time("HH:MM"), "to": time("HH:MM")}),
        &["day", "from", "to"],
    );
    let session = json!({
        "event_id": id("The event's id"),
        "title": {"type": "string", "minLength": 1, "maxLength": 160},
        "duration": {"type": "integer", "minimum": 5, "maximum": 720, "description": "Minutes"},
        "track": {"type": "string", "maxLength": 80},
        "speakers": {"type": "array", "maxItems": 20, "items": name(120), "description": "Everyone who must be there"},
        "audience": {"type": "integer", "minimum": 0, "maximum": 1000000, "description": "Expected audience: the room must seat them"},
        "at": object(json!({"day": day, "time": time("Start, HH:MM")}), &["day", "time"]),
        "room": {"type": "string", "maxLength": 80, "description": "A room's name, if it must be that room"},
        "after": {"type": "array", "maxItems": 50, "items": {"type": "string", "maxLength": 200}, "description": "Ids of sessions that must finish first"}
    });
    let mut edit = session.clone();
    edit["session_id"] = id("The session's id");
    vec![
        (
            ToolDef::new(
                "set_rooms",
                "Set an event's days (start and end of each), its rooms (name, seats, and when each is open; open all day if not said) and its breaks and lunch (a fixed time, or a span like 12:00-14:00 with a duration for \"around noon, 45 min\"). Replaces all three; sessions stay. Times are HH:MM.",
                object(
                    json!({
                        "event_id": id("The event's id"),
                        "days": {"type": "array", "minItems": 1, "maxItems": 31, "items": object(json!({"start": time("HH:MM"), "end": time("HH:MM")}), &["start", "end"])},
                        "rooms": {"type": "array", "minItems": 1, "maxItems": 50, "items": object(json!({"name": name(80), "capacity": {"type": "integer", "minimum": 1, "maximum": 1000000}, "open": {"type": "array", "maxItems": 31, "items": span.clone()}}), &["name", "capacity"])},
                        "breaks": {"type": "array", "maxItems": 100, "items": object(json!({"name": name(80), "day": day, "from": time("Earliest start, HH:MM"), "to": time("Latest end, HH:MM"), "duration": {"type": "integer", "minimum": 5, "maximum": 720, "description": "Minutes; leave out for a fixed break from-to"}}), &["name", "day", "from", "to"])}
                    }),
                    &["event_id", "days", "rooms"],
                ),
            ),
            Op::SetRooms,
        ),
        (
            ToolDef::new(
                "add_session",
                "Add a session to an event's program: title, minutes, and if known its track, speakers, expected audience, a fixed start or room, and sessions it must come after. Returns its session_id. Then build_schedule.",
                object(session, &["event_id", "title", "duration"]),
            ),
            Op::AddSession,
        ),
        (
            ToolDef::new(
                "edit_session",
                "Change a session of an event's program. Give only what changes. Then build_schedule.",
                object(edit, &["event_id", "session_id"]),
            ),
            Op::EditSession,
        ),
        (
            ToolDef::new(
                "build_schedule",
                "Work out the event's timetable from its program (code does the math; sessions already placed move as little as possible) and save it. Returns a headline: finish time of each day, how many sessions moved, warnings. Use show_schedule to read it.",
                object(json!({"event_id": id("The event's id")}), &["event_id"]),
            ),
            Op::Build,
        ),
        (
            ToolDef::new(
                "move_session",
                "Pin a session at a day and time (and room, if given) and re-plan the rest around it. Returns the same headline as build_schedule.",
                object(
                    json!({"event_id": id("The event's id"), "session_id": id("The session's id"), "day": day, "time": time("New start, HH:MM"), "room": {"type": "string", "maxLength": 80}}),
                    &["event_id", "session_id", "day", "time"],
                ),
            ),
            Op::Move,
        ),
        (
            ToolDef::new(
                "show_schedule",
                "Show the saved timetable of an event: one day, one track, or all of it.",
                object(
                    json!({"event_id": id("The event's id"), "day": day, "track": {"type": "string", "maxLength": 80}}),
                    &["event_id"],
                ),
            )
            .read_only(),
            Op::Show,
        ),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Op {
    SetRooms,
    AddSession,
    EditSession,
    Build,
    Move,
    Show,
}

#[derive(Deserialize)]
struct DayArg {
    start: String,
    end: String,
}

#[derive(Deserialize)]
struct SpanArg {
    day: u32,
    from: String,
    to: String,
}

#[derive(Deserialize)]
struct RoomArg {
    name: String,
    capacity: u32,
    open: Option<Vec<SpanArg>>,
}

#[derive(Deserialize)]
struct BreakArg {
    name: String,
    day: u32,
    from: String,
    to: String,
    duration: Option<u32>,
}

#[derive(Deserialize)]
struct SetRoomsArgs {
    event_id: String,
    days: Vec<DayArg>,
    rooms: Vec<RoomArg>,
    #[serde(default)]
    breaks: Vec<BreakArg>,
}

#[derive(Deserialize)]
struct AtArg {
    day: u32,
    time: String,
}

#[derive(Deserialize)]
struct SessionArgs {
    event_id: String,
    session_id: Option<String>,
    title: Option<String>,
    duration: Option<u32>,
    track: Option<String>,
    speakers: Option<Vec<String>>,
    audience: Option<u32>,
    at: Option<AtArg>,
    room: Option<String>,
    after: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct MoveArgs {
    event_id: String,
    session_id: String,
    day: u32,
    time: String,
    room: Option<String>,
}

#[derive(Deserialize)]
struct ShowArgs {
    event_id: String,
    day: Option<u32>,
    track: Option<String>,
}

fn bad(message: String) -> ToolError {
    ToolError::domain("bad_arguments", message)
}

fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| bad(format!("The arguments don't fit: {e}.")))
}

fn clock(text: &str) -> Result<u32, ToolError> {
    minutes(text).ok_or_else(|| bad(format!("{text} is not a time of day (HH:MM).")))
}

/// Day numbers are 1-based for people and the model, 0-based in the program.
fn day_index(day: u32) -> Result<u32, ToolError> {
    day.checked_sub(1)
        .ok_or_else(|| bad("Days are counted from 1.".into()))
}

fn slot(at: &AtArg) -> Result<Slot, ToolError> {
    Ok(Slot {
        day: day_index(at.day)?,
        start: clock(&at.time)?,
    })
}

/// An event's days, rooms and breaks, as `set_rooms` gives them.
type Layout = (Vec<Day>, Vec<Room>, Vec<Break>);

fn layout(a: SetRoomsArgs) -> Result<Layout, ToolError> {
    let days = a
        .days
        .iter()
        .map(|d| {
            Ok(Day {
                start: clock(&d.start)?,
                end: clock(&d.end)?,
            })
        })
        .collect::<Result<Vec<_>, ToolError>>()?;
    let all_day: Vec<Window> = (0u32..)
        .zip(&days)
        .map(|(day, d)| Window {
            day,
            start: d.start,
            end: d.end,
        })
        .collect();
    let window = |s: &SpanArg| {
        Ok(Window {
            day: day_index(s.day)?,
            start: clock(&s.from)?,
            end: clock(&s.to)?,
        })
    };
    let rooms = a
        .rooms
        .iter()
        .map(|r| {
            let windows = match &r.open {
                Some(open) => open.iter().map(window).collect::<Result<_, ToolError>>()?,
                None => all_day.clone(),
            };
            Ok(Room {
                id: r.name.trim().to_owned(),
                name: r.name.trim().to_owned(),
                capacity: r.capacity,
                windows,
            })
        })
        .collect::<Result<Vec<_>, ToolError>>()?;
    let breaks = (1..)
        .zip(&a.breaks)
        .map(|(n, b)| {
            let (earliest, latest_end) = (clock(&b.from)?, clock(&b.to)?);
            Ok(Break {
                id: format!("b{n}"),
                name: b.name.clone(),
                day: day_index(b.day)?,
                earliest,
                latest_end,
                duration: b.duration.unwrap_or(latest_end.saturating_sub(earliest)),
            })
        })
        .collect::<Result<Vec<_>, ToolError>>()?;
    Ok((days, rooms, breaks))
}

impl Op {
    async fn run(self, planner: &Planner, ctx: &Ctx, args: Value) -> Result<Value, ToolError> {
        let caller = Caller::from_ctx(ctx);
        match self {
            Op::SetRooms => {
                let a: SetRoomsArgs = parse(args)?;
                let event_id = a.event_id.clone();
                let (days, rooms, breaks) = layout(a)?;
                json(
                    planner
                        .set_rooms(&caller, &event_id, days, rooms, breaks)
                        .await?,
                )
            }
            Op::AddSession => {
                let a: SessionArgs = parse(args)?;
                let new = NewSession {
                    title: a.title.unwrap_or_default(),
                    duration: a.duration.unwrap_or_default(),
                    track: a.track,
                    speakers: a.speakers.unwrap_or_default(),
                    audience: a.audience.unwrap_or_default(),
                    fixed_start: a.at.as_ref().map(slot).transpose()?,
                    fixed_room: a.room,
                    after: a.after.unwrap_or_default(),
                };
                json(planner.add_session(&caller, &a.event_id, new).await?)
            }
            Op::EditSession => {
                let a: SessionArgs = parse(args)?;
                let changes = SessionChanges {
                    title: a.title,
                    duration: a.duration,
                    track: a.track,
                    speakers: a.speakers,
                    audience: a.audience,
                    fixed_start: a.at.as_ref().map(slot).transpose()?,
                    fixed_room: a.room,
                    after: a.after,
                };
                let session_id = a.session_id.unwrap_or_default();
                json(
                    planner
                        .edit_session(&caller, &a.event_id, &session_id, changes)
                        .await?,
                )
            }
            Op::Build => {
                let event_id = args.get("event_id").and_then(Value::as_str).unwrap_or("");
                json(planner.build_schedule(&caller, event_id).await?)
            }
            Op::Move => {
                let a: MoveArgs = parse(args)?;
                let at = slot(&AtArg {
                    day: a.day,
                    time: a.time,
                })?;
                json(
                    planner
                        .move_session(&caller, &a.event_id, &a.session_id, at, a.room)
                        .await?,
                )
            }
            Op::Show => {
                let a: ShowArgs = parse(args)?;
                json(
                    planner
                        .show_schedule(&caller, &a.event_id, a.day, a.track.as_deref())
                        .await?,
                )
            }
        }
    }
}

fn json<T: serde::Serialize>(value: T) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(ToolError::internal)
}

/// For the risk policy: the pin a `move_session` call asks for, if its arguments parse.
pub(crate) fn move_pin(args: &Value) -> Option<(String, Slot, Option<String>)> {
    let a: MoveArgs = serde_json::from_value(args.clone()).ok()?;
    let at = slot(&AtArg {
        day: a.day,
        time: a.time,
    })
    .ok()?;
    Some((a.session_id, at, a.room))
}
