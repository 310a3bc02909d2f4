//! Seeded programs for tests and the benchmark: a conference of `n` sessions over one to three
//! days, with rooms of mixed sizes, coffee breaks, a lunch "around noon", speakers giving
//! several talks, a few prerequisite links, a fixed keynote each day and a few speakers away for
//! a morning. Keynotes, breaks and absences are placed so they can't clash and every audience
//! fits some room, so nearly every program this makes has a timetable (a speaker drawn for many
//! long talks can still be overbooked, which the scheduler then explains).

use schedule_types::{Break, Day, Program, Room, Session, Slot, Unavailable, Window};

use crate::rng::Rng;

/// A program of `n` sessions from `seed`; the same arguments give the same program.
pub fn conference(n: usize, seed: u64) -> Program {
    let mut rng = Rng::new(seed ^ (n as u64).wrapping_mul(0x9E37_79B9));
    let days = match n {
        0..=40 => 1,
        41..=150 => 2,
        _ => 3,
    };
    let durations = [30u32, 45, 45, 60, 60, 90];
    let mean = 55.0;
    let open_per_room_day = 540.0 - 30.0 - 45.0 - 60.0;
    let rooms_n = ((n as f64 * mean) / (0.72 * open_per_room_day * days as f64))
        .ceil()
        .max(2.0) as usize;
    let sizes = [400u32, 200, 150, 120, 100, 80, 60, 40];
    let rooms: Vec<Room> = (0..rooms_n)
        .map(|r| Room {
            id: format!("r{r}"),
            name: format!("Room {}", r + 1),
            capacity: sizes[r.min(sizes.len() - 1)],
            windows: (0..days)
                .map(|d| {
                    // A few rooms open late on some days.
                    let start = if r > 0 && rng.below(6) == 0 { 600 } else { 540 };
                    Window {
                        day: d as u32,
                        start,
                        end: 1080,
                    }
                })
                .collect(),
        })
        .collect();
    let mut breaks = Vec::new();
    for d in 0..days as u32 {
        breaks.push(Break {
            id: format!("coffee-am-{d}"),
            name: "Morning coffee".into(),
            day: d,
            earliest: 630,
            latest_end: 645,
            duration: 15,
        });
        breaks.push(Break {
            id: format!("lunch-{d}"),
            name: "Lunch".into(),
            day: d,
            earliest: 705,
            latest_end: 825,
            duration: 45,
        });
        breaks.push(Break {
            id: format!("coffee-pm-{d}"),
            name: "Afternoon coffee".into(),
            day: d,
            earliest: 915,
            latest_end: 930,
            duration: 15,
        });
    }
    let speakers_n = n.max(2);
    let tracks_n = (rooms_n / 2).max(1);
    let mut sessions = Vec::with_capacity(n);
    for i in 0..n {
        let keynote = i < days;
        let duration = if keynote {
            60
        } else {
            durations[rng.below(durations.len() as u64) as usize]
        };
        // The largest room is kept mostly for keynotes, so its hours don't run out.
        let pick = if rng.below(3 * rooms_n as u64) == 0 {
            0
        } else {
            1 + rng.below(rooms_n as u64 - 1) as usize
        };
        let room_cap = rooms[pick].capacity;
        let audience = if keynote {
            rooms[0].capacity
        } else {
            room_cap / 2 + rng.below(u64::from(room_cap / 2) + 1) as u32
        };
        let mut speakers = vec![format!("speaker-{}", rng.below(speakers_n as u64))];
        if rng.below(4) == 0 {
            speakers.push(format!("speaker-{}", rng.below(speakers_n as u64)));
        }
        speakers.dedup();
        if keynote {
            speakers = vec![format!("keynote-{i}")];
        }
        let mut after = Vec::new();
        if i > days && rng.below(10) == 0 {
            after.push(format!("s{}", days + rng.below((i - days) as u64) as usize));
        }
        let fixed_room = if !keynote && rng.below(25) == 0 {
            Some(format!("r{}", rng.below(rooms_n as u64)))
        } else {
            None
        };
        let audience = match &fixed_room {
            Some(r) => audience.min(rooms.iter().find(|x| &x.id == r).unwrap().capacity),
            None => audience,
        };
        sessions.push(Session {
            id: format!("s{i}"),
            title: if keynote {
                format!("Keynote, day {}", i + 1)
            } else {
                format!("Talk {i}")
            },
            duration,
            track: if keynote {
                None
            } else {
                Some(format!("track-{}", rng.below(tracks_n as u64)))
            },
            speakers,
            audience,
            fixed_start: keynote.then_some(Slot {
                day: i as u32,
                start: 540,
            }),
            fixed_room: if keynote {
                Some("r0".into())
            } else {
                fixed_room
            },
            after,
        });
    }
    let unavailable = (0..speakers_n.min(3))
        .map(|k| Unavailable {
            speaker: format!("speaker-{}", k * 7 % speakers_n),
            day: 0,
            start: 540,
            end: 720,
        })
        .collect();
    Program {
        days: vec![
            Day {
                start: 540,
                end: 1080
            };
            days
        ],
        rooms,
        sessions,
        breaks,
        unavailable,
        changeover_minutes: 10,
    }
}

/// What the program tools allow at most, shaped to be hard: 31 whole days, 50 rooms, 100
/// all-day five-minute breaks and 300 sessions, each with 20 speakers drawn from 40 people (the
/// busiest has 151 sessions). It has timetables, but every slot probed reads 20 people's days:
/// before the work limit, a plan of it kept a core busy for 420 s.
pub fn crowded() -> Program {
    let days = 31u32;
    let whole = |day| Window {
        day,
        start: 0,
        end: 1440,
    };
    let rooms = (0..50u32)
        .map(|r| Room {
            id: format!("r{r}"),
            name: format!("Room {r}"),
            capacity: 10 + r * 7,
            windows: (0..days).map(whole).collect(),
        })
        .collect();
    let breaks = (0..100u32)
        .map(|b| Break {
            id: format!("b{b}"),
            name: "Pause".into(),
            day: b % days,
            earliest: 0,
            latest_end: 1440,
            duration: 5,
        })
        .collect();
    let sessions = (0..300usize)
        .map(|i| Session {
            id: format!("s{i}"),
            title: format!("Talk {i}"),
            duration: 30 + (i % 4) as u32 * 15,
            track: None,
            speakers: (0..20)
                .map(|k| format!("p{}", (i * 7 + k * 13) % 40))
                .collect(),
            audience: 5 + (i % 50) as u32 * 5,
            fixed_start: None,
            fixed_room: None,
            after: Vec::new(),
        })
        .collect();
    Program {
        days: (0..days)
            .map(|_| Day {
                start: 0,
                end: 1440,
            })
            .collect(),
        rooms,
        sessions,
        breaks,
        unavailable: Vec::new(),
        changeover_minutes: 10,
    }
}
