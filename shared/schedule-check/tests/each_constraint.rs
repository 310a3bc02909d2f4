//! A small program with a timetable that keeps every rule, then each rule broken alone: the
//! checker must name exactly that rule, and only it.

use schedule_check::{Constraint, verify};
use schedule_types::{Program, Timetable};
use serde_json::json;

/// Two rooms (100 and 30 seats, 09:00–17:00, the small one from 10:00), three sessions, a lunch
/// 12:00–12:45, Ann away 15:00–16:00, a 10-minute changeover.
fn program() -> Program {
    serde_json::from_value(json!({
        "days": [{"start": 540, "end": 1020}],
        "rooms": [
            {"id": "big", "name": "Hall", "capacity": 100, "windows": [{"day": 0, "start": 540, "end": 1020}]},
            {"id": "small", "name": "Side room", "capacity": 30, "windows": [{"day": 0, "start": 600, "end": 1020}]}
        ],
        "sessions": [
            {"id": "open", "title": "Opening", "duration": 60, "speakers": ["Ann"], "audience": 90,
             "fixed_start": {"day": 0, "start": 540}, "fixed_room": "big"},
            {"id": "deep", "title": "Deep dive", "duration": 60, "speakers": ["Ann"], "audience": 25, "after": ["open"]},
            {"id": "panel", "title": "Panel", "duration": 90, "speakers": ["Bo", "Cy"], "audience": 80}
        ],
        "breaks": [{"id": "lunch", "name": "Lunch", "day": 0, "earliest": 690, "latest_end": 795, "duration": 45}],
        "unavailable": [{"speaker": "Ann", "day": 0, "start": 900, "end": 960}],
        "changeover_minutes": 10
    }))
    .unwrap()
}

/// Opening 09:00–10:00 Hall; Deep dive 10:10–11:10 Side room; Panel 10:00–11:30 Hall; lunch 12:00.
fn timetable() -> Timetable {
    serde_json::from_value(json!({
        "sessions": [
            {"session": "open", "room": "big", "day": 0, "start": 540},
            {"session": "deep", "room": "small", "day": 0, "start": 610},
            {"session": "panel", "room": "big", "day": 0, "start": 600}
        ],
        "breaks": [{"id": "lunch", "day": 0, "start": 720}]
    }))
    .unwrap()
}

/// Applies `edit` to a copy of the good program and timetable and expects exactly `broken`.
fn check(broken: Constraint, edit: impl FnOnce(&mut Program, &mut Timetable)) {
    let (mut p, mut t) = (program(), timetable());
    edit(&mut p, &mut t);
    let rejection = verify(&p, &t).expect_err("the broken timetable must be rejected");
    assert_eq!(rejection.constraints(), vec![broken], "{rejection}");
}

fn at<'a>(t: &'a mut Timetable, id: &str) -> &'a mut schedule_types::Placed {
    t.sessions.iter_mut().find(|p| p.session == id).unwrap()
}

#[test]
fn the_good_timetable_passes() {
    verify(&program(), &timetable()).unwrap();
}

#[test]
fn a_missing_or_unknown_session_is_caught() {
    check(Constraint::EverySessionOnce, |_, t| {
        t.sessions.retain(|p| p.session != "panel");
    });
    check(Constraint::EverySessionOnce, |_, t| {
        t.sessions.push(schedule_types::Placed {
            session: "ghost".into(),
            room: "big".into(),
            day: 0,
            start: 900,
        });
    });
}

#[test]
fn too_small_a_room_is_caught() {
    check(Constraint::RoomSeats, |p, _| p.sessions[1].audience = 31);
}

#[test]
fn a_session_outside_its_rooms_hours_or_the_day_is_caught() {
    // The side room opens at 10:00.
    check(Constraint::RoomOpen, |p, t| {
        at(t, "deep").start = 560;
        p.sessions[0].speakers.clear();
        p.sessions[1].after.clear();
    });
    // Past the day's end (the room's window is wider than the day).
    check(Constraint::RoomOpen, |p, t| {
        p.rooms[1].windows[0].end = 1200;
        at(t, "deep").start = 990;
    });
}

#[test]
fn two_sessions_in_one_room_at_once_are_caught() {
    check(Constraint::RoomOnce, |_, t| {
        // Panel 13:00–14:30 and Deep dive 13:10–14:10, both in the Hall.
        at(t, "panel").start = 780;
        at(t, "deep").room = "big".into();
        at(t, "deep").start = 790;
    });
}

#[test]
fn a_person_in_two_places_or_without_changeover_is_caught() {
    // Ann's deep dive starts when the opening ends: no changeover.
    check(Constraint::PersonOnce, |_, t| at(t, "deep").start = 600);
    // Bo in the panel and the deep dive at once.
    check(Constraint::PersonOnce, |p, _| {
        p.sessions[1].speakers.push("Bo".into())
    });
}

#[test]
fn a_speaker_scheduled_while_away_is_caught() {
    check(Constraint::SpeakerAvailable, |_, t| {
        at(t, "deep").start = 920
    });
}

#[test]
fn a_dependant_before_its_prerequisite_is_caught() {
    check(Constraint::Order, |p, _| {
        p.sessions[1].after.push("panel".into())
    });
}

#[test]
fn a_session_during_a_break_or_a_misplaced_break_is_caught() {
    check(Constraint::Breaks, |_, t| at(t, "deep").start = 700);
    check(Constraint::Breaks, |_, t| t.breaks[0].start = 760);
    check(Constraint::Breaks, |_, t| t.breaks.clear());
}

#[test]
fn a_moved_fixed_session_is_caught() {
    check(Constraint::Fixed, |p, _| {
        p.sessions[0].fixed_start = Some(schedule_types::Slot { day: 0, start: 545 })
    });
    check(Constraint::Fixed, |p, _| {
        p.sessions[0].fixed_room = Some("small".into())
    });
}

#[test]
fn the_user_sentence_is_calm_and_the_log_names_ids() {
    let (p, mut t) = (program(), timetable());
    at(&mut t, "deep").start = 700;
    let r = verify(&p, &t).unwrap_err();
    assert!(r.sentence().contains("haven't saved it"));
    assert!(!r.sentence().contains("deep"));
    assert!(r.to_string().contains("deep"), "{r}");
}
