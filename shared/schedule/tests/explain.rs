//! Programs that can't be scheduled get reasons in numbers a person can act on.

use schedule::{ReasonKind, plan};
use schedule_types::Program;
use serde_json::{Value, json};

/// One day 09:00–17:00 and one 100-seat room open all day, plus `sessions`.
fn program(sessions: Value) -> Program {
    program_with(
        json!([{"id": "hall", "name": "Hall", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 1020}]}]),
        sessions,
    )
}

fn program_with(rooms: Value, sessions: Value) -> Program {
    serde_json::from_value(
        json!({"days": [{"start": 540, "end": 1020}], "rooms": rooms, "sessions": sessions}),
    )
    .unwrap()
}

fn talk(id: &str, minutes: u32, speaker: &str) -> Value {
    json!({"id": id, "title": format!("Talk {id}"), "duration": minutes, "speakers": [speaker], "audience": 50})
}

/// The reasons' kinds and sentences.
fn why(p: &Program) -> Vec<(ReasonKind, String)> {
    let e = plan(p, None).expect_err("this program has no timetable");
    e.reasons
        .into_iter()
        .map(|r| (r.kind, r.sentence))
        .collect()
}

#[test]
fn too_few_room_hours_says_by_how_much() {
    // Seven 90-minute talks: 10.5 h in a room open 8 h.
    let talks: Vec<Value> = (0..7)
        .map(|i| talk(&format!("t{i}"), 90, &format!("p{i}")))
        .collect();
    let reasons = why(&program(Value::Array(talks)));
    assert_eq!(
        reasons,
        vec![(
            ReasonKind::RoomHoursShort,
            "Short by 2.5 h of room time in its one day: sessions for 50 or more people need 10.5 h, but rooms seating that many are open 8 h after breaks. Add a room or shorten sessions.".to_string()
        )]
    );
}

#[test]
fn an_overbooked_speaker_is_named_with_hours() {
    let mut p = program_with(
        json!([
            {"id": "a", "name": "A", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 900}]},
            {"id": "b", "name": "B", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 900}]}
        ]),
        json!([
            talk("t1", 105, "Ann"),
            talk("t2", 105, "Ann"),
            talk("t3", 105, "Ann"),
            talk("t4", 105, "Ann")
        ]),
    );
    p.days[0].end = 900;
    assert_eq!(
        why(&p),
        vec![(
            ReasonKind::SpeakerOverbooked,
            "Ann is booked for 7 h of sessions but has only 6 h free in its one day (after breaks and unavailable times): give a session to someone else or shorten them.".to_string()
        )]
    );
}

#[test]
fn a_circle_of_dependencies_is_named() {
    let mut a = talk("a", 30, "x");
    a["after"] = json!(["b"]);
    let mut b = talk("b", 30, "y");
    b["after"] = json!(["a"]);
    let reasons = why(&program(json!([a, b])));
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, ReasonKind::DependencyCycle);
    assert!(
        reasons[0].1.contains("“Talk a”") && reasons[0].1.contains("“Talk b”"),
        "{}",
        reasons[0].1
    );
}

#[test]
fn too_big_an_audience_or_too_long_a_session_say_the_limit() {
    let mut big = talk("big", 30, "x");
    big["audience"] = json!(500);
    let reasons = why(&program(json!([big, talk("long", 600, "y")])));
    assert_eq!(
        reasons,
        vec![
            (
                ReasonKind::NoRoomLargeEnough,
                "“Talk big” expects 500 people but the largest room seats 100: find a bigger room or cap the audience at 100.".to_string()
            ),
            (
                ReasonKind::SessionTooLong,
                "“Talk long” lasts 10 h but the longest open stretch of a room that seats 50 (breaks taken out) is 8 h: shorten it by 2 h or open a room longer.".to_string()
            ),
            (
                ReasonKind::RoomHoursShort,
                "Short by 2.5 h of room time in its one day: sessions for 50 or more people need 10.5 h, but rooms seating that many are open 8 h after breaks. Add a room or shorten sessions.".to_string()
            ),
            (
                ReasonKind::SpeakerOverbooked,
                "y is booked for 10 h of sessions but has only 8 h free in its one day (after breaks and unavailable times): give a session to someone else or shorten them.".to_string()
            ),
        ]
    );
}

#[test]
fn a_chain_longer_than_the_event_is_named() {
    let mut b = talk("b", 300, "y");
    b["after"] = json!(["a"]);
    let reasons = why(&program(json!([talk("a", 240, "x"), b])));
    assert_eq!(
        reasons[0],
        (
            ReasonKind::ChainTooLong,
            "“Talk b” and the sessions it must follow need 9 h one after another, but the event has 8 h in its one day: drop an 'after' link or shorten one of them.".to_string()
        )
    );
}

#[test]
fn fixed_times_that_clash_are_named() {
    let mut a = talk("a", 60, "x");
    a["fixed_start"] = json!({"day": 0, "start": 600});
    a["fixed_room"] = json!("hall");
    let mut b = talk("b", 60, "y");
    b["fixed_start"] = json!({"day": 0, "start": 630});
    b["fixed_room"] = json!("hall");
    let reasons = why(&program(json!([a, b])));
    assert_eq!(
        reasons,
        vec![(
            ReasonKind::FixedClash,
            "“Talk a” (day 1 10:00–11:00) and “Talk b” (day 1 10:30–11:30) are both fixed to the same room at overlapping times: move one of them.".to_string()
        )]
    );
}

#[test]
fn a_lunch_in_the_way_of_a_fixed_talk_is_named() {
    // A lunch that could move out of the way is no clash; a fixed one is.
    let mut p = program(json!([talk("a", 60, "x")]));
    p.sessions[0].fixed_start = Some(schedule_types::Slot { day: 0, start: 690 });
    p.breaks = serde_json::from_value(json!([{"id": "l", "name": "Lunch", "day": 0, "earliest": 720, "latest_end": 765, "duration": 45}])).unwrap();
    assert_eq!(
        why(&p),
        vec![(ReasonKind::FixedClash, "“Talk a” is fixed to day 1 11:30–12:30, which runs 30 min into “Lunch”: move the session or the break.".to_string())]
    );
}

#[test]
fn when_only_the_search_can_tell_it_still_says_why_in_numbers() {
    // Ann's two 4-hour talks fill the 8-hour day exactly, but she needs 10 minutes between them:
    // no necessary condition catches it, the search does.
    let mut p = program_with(
        json!([
            {"id": "a", "name": "A", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 1020}]},
            {"id": "b", "name": "B", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 1020}]}
        ]),
        json!([talk("t1", 240, "Ann"), talk("t2", 240, "Ann")]),
    );
    p.changeover_minutes = 10;
    let reasons = why(&p);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, ReasonKind::NoSlot);
    assert!(
        reasons[0]
            .1
            .starts_with("Couldn't find a place for “Talk t"),
        "{}",
        reasons[0].1
    );
    assert!(
        reasons[0].1.contains("(4 h, 50 people)"),
        "{}",
        reasons[0].1
    );
}

#[test]
fn broken_references_are_reasons_not_panics() {
    let mut a = talk("a", 30, "x");
    a["after"] = json!(["ghost"]);
    a["fixed_room"] = json!("attic");
    let reasons = why(&program(json!([a, talk("a", 30, "y")])));
    let kinds: Vec<ReasonKind> = reasons.iter().map(|r| r.0).collect();
    assert_eq!(
        kinds,
        vec![
            ReasonKind::DuplicateId,
            ReasonKind::UnknownSession,
            ReasonKind::UnknownRoom
        ]
    );
}
