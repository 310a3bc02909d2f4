//! Building, moving and showing an event's timetable. The scheduler (`schedule::plan`) does
//! the math; the independent checker (`schedule_check::verify`) re-checks every timetable
//! before it is saved. A saved timetable is the event's `schedule` record, written with the
//! program in one audited commit, so undo restores the previous one.

use crate::program::{PROGRAM, SCHEDULE, ScheduleRecord};
use crate::risk::found;
use crate::service::{Access, Caller, change};
use crate::{Planner, PlannerError};
use schedule::Plan;
use schedule_types::{Program, Slot, Timetable};
use serde::Serialize;

/// The headline of a build: not the whole timetable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildSummary {
    pub event_id: String,
    pub sessions: usize,
    /// When each day's last session ends, `HH:MM`, by day (1-based in words, 0-based here).
    pub finishes: Vec<String>,
    /// Sessions that had a place and now have another.
    pub moved: usize,
    /// Sessions placed for the first time.
    pub added: usize,
    pub warnings: Vec<String>,
}

/// One line of a shown timetable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// Day of the event, 1 for the first (as people and the tools count).
    pub day: u32,
    pub start: String,
    pub end: String,
    pub what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// What a re-plan would do, without saving it: for the confirmation gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DryRun {
    pub title: String,
    /// The title of the session a `move_session` pins, when it pins one.
    pub pinned: Option<String>,
    /// The titles of the sessions that would move, in the plan's order.
    pub moved: Vec<String>,
}

impl Planner {
    /// Plan the event's program (moving as few sessions as possible against the saved
    /// timetable), check it, and save it.
    pub async fn build_schedule(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<BuildSummary, PlannerError> {
        self.replan(caller, event_id, None).await
    }

    /// Pin a session at `at` (and in `room`, if given) and re-plan around it.
    pub async fn move_session(
        &self,
        caller: &Caller,
        event_id: &str,
        session_id: &str,
        at: Slot,
        room: Option<String>,
    ) -> Result<BuildSummary, PlannerError> {
        self.replan(caller, event_id, Some((session_id, at, room)))
            .await
    }

    async fn replan(
        &self,
        caller: &Caller,
        event_id: &str,
        pin: Option<(&str, Slot, Option<String>)>,
    ) -> Result<BuildSummary, PlannerError> {
        self.open_event(caller, event_id).await?;
        let (mut record, program_before) = self.program_of(caller, event_id).await?;
        let pinned = pin.is_some();
        if let Some((session_id, at, room)) = pin {
            pin_session(&mut record.program, session_id, at, room)?;
        }
        let previous = self
            .maybe::<ScheduleRecord>(caller, SCHEDULE, event_id)
            .await?;
        let plan = planned(
            &caller.user,
            &record.program,
            previous.as_ref().map(|(s, _)| &s.timetable),
        )
        .await?;
        checked(event_id, &record.program, &plan)?;
        let mut summary = summary(event_id, &record.program, &plan);
        if previous.is_none() {
            summary.added = summary.sessions;
        }
        let saved = ScheduleRecord {
            event_id: event_id.to_owned(),
            timetable: plan.timetable,
        };
        let mut changes = vec![change(
            SCHEDULE,
            event_id,
            &caller.user,
            previous.map(|(_, v)| v),
            Some(&saved),
        )];
        if pinned {
            changes.push(change(
                PROGRAM,
                event_id,
                &caller.user,
                Some(program_before),
                Some(&record),
            ));
        }
        self.write(Access::Owner(caller), changes, &summary).await?;
        Ok(summary)
    }

    /// What building (or moving `pin`) would do to the saved timetable of a published event,
    /// without saving: `None` when the event is not published (nothing people planned around
    /// moves: no plan is made for the question), when there is no saved timetable, or when the
    /// plan would fail (then nothing is saved anyway). An error only when storage failed (what
    /// it would do cannot be told).
    pub(crate) async fn dry_run(
        &self,
        caller: &Caller,
        event_id: &str,
        pin: Option<(&str, Slot, Option<String>)>,
    ) -> Result<Option<DryRun>, PlannerError> {
        let Some(event) = found(self.open_event(caller, event_id).await)? else {
            return Ok(None);
        };
        if event.status != crate::EventStatus::Published {
            return Ok(None);
        }
        let Some((mut record, _)) = found(self.program_of(caller, event_id).await)? else {
            return Ok(None);
        };
        let Some((previous, _)) = found(
            self.maybe::<ScheduleRecord>(caller, SCHEDULE, event_id)
                .await,
        )?
        .flatten() else {
            return Ok(None);
        };
        let pinned = match pin {
            Some((session_id, at, room)) => {
                if pin_session(&mut record.program, session_id, at, room).is_err() {
                    return Ok(None);
                }
                record.program.session(session_id).map(|s| s.title.clone())
            }
            None => None,
        };
        // No place for the plan: what the call would do cannot be told (the call is held).
        let Ok(plan) =
            off_the_async_threads(&caller.user, &record.program, Some(&previous.timetable)).await?
        else {
            return Ok(None);
        };
        Ok(Some(DryRun {
            title: event.title,
            pinned,
            moved: plan
                .moved
                .iter()
                .map(|m| {
                    record
                        .program
                        .session(&m.session)
                        .map_or_else(|| m.session.clone(), |s| s.title.clone())
                })
                .collect(),
        }))
    }

    /// The saved timetable of an event, one day (1 for the first) or one track of it, as short
    /// lines.
    pub async fn show_schedule(
        &self,
        caller: &Caller,
        event_id: &str,
        day: Option<u32>,
        track: Option<&str>,
    ) -> Result<Vec<Line>, PlannerError> {
        let (record, _) = self.program_of(caller, event_id).await?;
        let Some((saved, _)) = self
            .maybe::<ScheduleRecord>(caller, SCHEDULE, event_id)
            .await?
        else {
            return Err(PlannerError::Rule(
                "This event has no timetable yet: build it first.".into(),
            ));
        };
        Ok(lines(&record.program, &saved.timetable, day, track))
    }
}

fn pin_session(
    program: &mut Program,
    session_id: &str,
    at: Slot,
    room: Option<String>,
) -> Result<(), PlannerError> {
    if let Some(room) = room.as_deref().filter(|r| program.room(r).is_none()) {
        return Err(PlannerError::Rule(format!(
            "There is no room named {room}."
        )));
    }
    let Some(session) = program.sessions.iter_mut().find(|s| s.id == session_id) else {
        return Err(PlannerError::Rule(format!(
            "This program has no session with id {session_id}."
        )));
    };
    session.fixed_start = Some(at);
    if room.is_some() {
        session.fixed_room = room;
    }
    Ok(())
}

async fn planned(
    owner: &transcript::UserId,
    program: &Program,
    previous: Option<&Timetable>,
) -> Result<Plan, PlannerError> {
    off_the_async_threads(owner, program, previous).await?.map_err(|why| {
        let too_large = why
            .reasons
            .iter()
            .any(|r| r.kind == schedule::ReasonKind::TooLarge);
        PlannerError::Rule(if too_large {
            // Not that none exists: the search stopped before it found one.
            format!(
                "No timetable was found within the work one plan may take, so nothing changed. {why}"
            )
        } else {
            format!("No timetable fits this program, so nothing changed. {why}")
        })
    })
}

/// `schedule::plan` of `owner`'s program on a plan thread ([`crate::plan_threads`]);
/// [`PlannerError::Busy`] when no place came free in time.
async fn off_the_async_threads(
    owner: &transcript::UserId,
    program: &Program,
    previous: Option<&Timetable>,
) -> Result<Result<Plan, schedule::Infeasible>, PlannerError> {
    let (program, previous) = (crate::program::as_planned(program), previous.cloned());
    crate::plan_threads::on_a_plan_thread(&owner.0, move || {
        schedule::plan(&program, previous.as_ref())
    })
    .await
    .map_err(|_| PlannerError::Busy)
}

/// The checker's verdict before a save. A rejection is a scheduler bug: logged as an error
/// naming the rules broken, and the user gets the checker's calm sentence.
pub(crate) fn checked(event_id: &str, program: &Program, plan: &Plan) -> Result<(), PlannerError> {
    let program = crate::program::as_planned(program);
    schedule_check::verify(&program, &plan.timetable).map_err(|rejection| {
        tracing::error!(
            event_id,
            constraints = ?rejection.constraints(),
            "scheduler bug: {rejection}"
        );
        PlannerError::Rule(rejection.sentence().to_owned())
    })
}

fn summary(event_id: &str, program: &Program, plan: &Plan) -> BuildSummary {
    let finishes = (0..program.days.len())
        .map(|day| {
            let end = plan
                .timetable
                .sessions
                .iter()
                .filter(|p| p.day as usize == day)
                .filter_map(|p| program.session(&p.session).map(|s| p.start + s.duration))
                .max();
            end.map_or_else(|| "nothing scheduled".into(), clock)
        })
        .collect();
    let mut warnings = Vec::new();
    if plan.stats.makespan > plan.stats.lower_bound {
        warnings.push(format!(
            "The program could end at most {} min sooner in theory.",
            plan.stats.makespan - plan.stats.lower_bound
        ));
    }
    let titles: Vec<&str> = plan
        .moved
        .iter()
        .filter_map(|m| program.session(&m.session))
        .map(|s| s.title.as_str())
        .take(5)
        .collect();
    if !titles.is_empty() {
        warnings.push(format!("Moved: {}.", titles.join(", ")));
    }
    BuildSummary {
        event_id: event_id.to_owned(),
        sessions: plan.timetable.sessions.len(),
        finishes,
        moved: plan.moved.len(),
        added: plan.added.len(),
        warnings,
    }
}

fn lines(program: &Program, t: &Timetable, day: Option<u32>, track: Option<&str>) -> Vec<Line> {
    let mut out: Vec<Line> = t
        .sessions
        .iter()
        .filter(|p| day.is_none_or(|d| d == p.day + 1))
        .filter_map(|p| Some((p, program.session(&p.session)?)))
        .filter(|(_, s)| track.is_none_or(|t| s.track.as_deref() == Some(t)))
        .map(|(p, s)| Line {
            day: p.day + 1,
            start: clock(p.start),
            end: clock(p.start + s.duration),
            what: s.title.clone(),
            room: Some(p.room.clone()),
            track: s.track.clone(),
            session_id: Some(s.id.clone()),
        })
        .collect();
    if track.is_none() {
        out.extend(
            t.breaks
                .iter()
                .filter(|b| day.is_none_or(|d| d == b.day + 1))
                .filter_map(|b| {
                    let def = program.breaks.iter().find(|d| d.id == b.id)?;
                    Some(Line {
                        day: b.day + 1,
                        start: clock(b.start),
                        end: clock(b.start + def.duration),
                        what: def.name.clone(),
                        room: None,
                        track: None,
                        session_id: None,
                    })
                }),
        );
    }
    out.sort_by(|a, b| (a.day, &a.start, &a.room).cmp(&(b.day, &b.start, &b.room)));
    out
}

/// `HH:MM` of a minute from midnight.
pub(crate) fn clock(minute: u32) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// Minutes from midnight of `HH:MM`.
pub(crate) fn minutes(text: &str) -> Option<u32> {
    let (h, m) = text.trim().split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 24 && m < 60 && h * 60 + m <= 24 * 60).then_some(h * 60 + m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_types::{Day, Placed, Room, Session, Window};

    fn program() -> Program {
        let session = |id: &str| Session {
            id: id.into(),
            title: id.into(),
            duration: 60,
            track: None,
            speakers: vec!["Ada".into()],
            audience: 10,
            fixed_start: None,
            fixed_room: None,
            after: Vec::new(),
        };
        Program {
            days: vec![Day {
                start: 540,
                end: 720,
            }],
            rooms: vec![Room {
                id: "Hall".into(),
                name: "Hall".into(),
                capacity: 50,
                windows: vec![Window {
                    day: 0,
                    start: 540,
                    end: 720,
                }],
            }],
            sessions: vec![session("a"), session("b")],
            breaks: Vec::new(),
            unavailable: Vec::new(),
            changeover_minutes: 0,
        }
    }

    /// A timetable the scheduler must never return (both talks at once, same room and
    /// speaker) stands in for a scheduler bug: the checker stops it, the bug is logged as an
    /// error naming the rule, and the user gets the calm sentence.
    #[test]
    fn a_timetable_the_checker_rejects_is_refused_with_the_calm_sentence() {
        let p = program();
        let mut plan = schedule::plan(&p, None).unwrap();
        assert!(checked("ev-1", &p, &plan).is_ok());
        plan.timetable.sessions = ["a", "b"]
            .map(|s| Placed {
                session: s.into(),
                room: "Hall".into(),
                day: 0,
                start: 540,
            })
            .to_vec();
        let log = Log::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_ansi(false)
            .finish();
        let err = tracing::subscriber::with_default(subscriber, || {
            checked("ev-1", &p, &plan).unwrap_err()
        });
        let line = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(line.contains("ERROR"), "{line}");
        assert!(
            line.contains("scheduler bug") && line.contains("RoomOnce"),
            "{line}"
        );
        assert!(line.contains("ev-1"), "{line}");
        let rejection = schedule_check::verify(&p, &plan.timetable).unwrap_err();
        assert_eq!(err.to_string(), rejection.sentence());
    }

    /// Where the test's log lines go.
    #[derive(Clone, Default)]
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
        type Writer = Log;
        fn make_writer(&'a self) -> Log {
            self.clone()
        }
    }

    #[test]
    fn clock_times_read_and_print_as_minutes_from_midnight() {
        assert_eq!(minutes("09:05"), Some(545));
        assert_eq!(minutes("24:00"), Some(1440));
        assert_eq!(minutes("24:30"), None);
        assert_eq!(minutes("9h"), None);
        assert_eq!(clock(545), "09:05");
    }
}
