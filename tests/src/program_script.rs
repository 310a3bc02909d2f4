//! A small event program made by tool calls, for the timetable tests: two days, two rooms, a
//! coffee break on day 1, and four sessions each pinned to a start and a room, so the
//! timetable the scheduler saves is known in advance. One session's title is markup, to show
//! that pages render it as text.

use backend::Reply;
use serde_json::json;
use transcript::StopReason;

/// A session title that runs script if a page ever puts it in as HTML.
pub const XSS_TITLE: &str = "<img src=x onerror=alert(1)>";

/// The model's call creating a draft event.
pub fn create_event(title: &str) -> Reply {
    Reply::tool_call(
        "c-create",
        "create_event",
        json!({"title": title, "starts_at": "2026-06-04T09:00", "venue": "Congress Hall", "capacity": 300}),
    )
}

/// One reply whose calls set the rooms, add the four sessions and build the timetable:
///
/// | day | time        | Main Hall          | Room B      |
/// |-----|-------------|--------------------|-------------|
/// | 1   | 09:00-10:00 | Keynote            |             |
/// | 1   | 09:00-09:45 |                    | [`XSS_TITLE`] |
/// | 1   | 10:30-10:45 | Coffee (all rooms) |             |
/// | 1   | 11:00-12:00 | Rust in Production |             |
/// | 2   | 09:30-11:00 |                    | Workshop    |
pub fn build_program(event_id: &str) -> Reply {
    let session = |title: &str, minutes: u32, day: u32, time: &str, room: &str| {
        let track = match room {
            "Main Hall" => "Plenary",
            _ => "Hands-on",
        };
        json!({
            "event_id": event_id, "title": title, "duration": minutes,
            "at": {"day": day, "time": time}, "room": room, "audience": 30,
            "speakers": [format!("{title} speaker")], "track": track,
        })
    };
    Reply::new()
        .call(
        "c-rooms",
        "set_rooms",
        json!({
            "event_id": event_id,
            "days": [{"start": "09:00", "end": "13:00"}, {"start": "09:00", "end": "12:00"}],
            "rooms": [{"name": "Main Hall", "capacity": 200}, {"name": "Room B", "capacity": 40}],
            "breaks": [{"name": "Coffee", "day": 1, "from": "10:30", "to": "10:45"}],
        }),
    )
    .call(
        "c-s1",
        "add_session",
        session("Keynote", 60, 1, "09:00", "Main Hall"),
    )
    .call(
        "c-s2",
        "add_session",
        session(XSS_TITLE, 45, 1, "09:00", "Room B"),
    )
    .call(
        "c-s3",
        "add_session",
        session("Rust in Production", 60, 1, "11:00", "Main Hall"),
    )
    .call(
        "c-s4",
        "add_session",
        session("Workshop", 90, 2, "09:30", "Room B"),
    )
    .call("c-build", "build_schedule", json!({"event_id": event_id}))
    .stop(StopReason::ToolUse)
}

/// The model's call moving a session to `time` on day 1 in `room`.
pub fn move_session(event_id: &str, session_id: &str, time: &str, room: &str) -> Reply {
    Reply::tool_call(
        "c-move",
        "move_session",
        json!({"event_id": event_id, "session_id": session_id, "day": 1, "time": time, "room": room}),
    )
}
