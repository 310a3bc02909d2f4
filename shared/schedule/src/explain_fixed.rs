//! Fixed times that can't all hold: outside the day or every room's hours, on a break, on top
//! of each other, or in the wrong order.

use schedule_types::Session;

use crate::bounds::least_overlap;
use crate::explain::{Reason, clock, span};
use crate::index::Problem;

fn day_at(s: &Session) -> (u32, u32, u32) {
    let f = s.fixed_start.unwrap();
    (f.day, f.start, f.start + s.duration)
}

fn when(s: &Session) -> String {
    let (d, a, b) = day_at(s);
    format!("day {} {}–{}", d + 1, clock(a), clock(b))
}

pub(crate) fn fixed_clashes(pr: &Problem) -> Vec<Reason> {
    let p = pr.p;
    let mut out = Vec::new();
    let fixed: Vec<usize> = (0..pr.n())
        .filter(|&i| p.sessions[i].fixed_start.is_some())
        .collect();
    for &i in &fixed {
        let s = &p.sessions[i];
        let (d, a, b) = day_at(s);
        let ids = vec![s.id.clone()];
        let Some(day) = p.days.get(d as usize) else {
            let t = format!(
                "“{}” is fixed to day {}, but the event has {} day(s): move it.",
                s.title,
                d + 1,
                p.days.len()
            );
            out.push(Reason::fixed_clash(t, ids));
            continue;
        };
        if a < day.start || b > day.end {
            let t = format!(
                "“{}” is fixed to {}, outside the day's hours ({}–{}): move it inside them.",
                s.title,
                when(s),
                clock(day.start),
                clock(day.end)
            );
            out.push(Reason::fixed_clash(t, ids));
            continue;
        }
        let open = pr.rooms_for[i].iter().any(|&r| {
            pr.windows[r][d as usize]
                .iter()
                .any(|&(x, y)| x <= a && b <= y)
        });
        if !open && !pr.rooms_for[i].is_empty() {
            let t = format!(
                "“{}” is fixed to {}, but no room seating {} is open then: move it or open a room at that time.",
                s.title,
                when(s),
                s.audience
            );
            out.push(Reason::fixed_clash(t, ids.clone()));
        }
        for br in p.breaks.iter().filter(|br| br.day == d) {
            let must = least_overlap(a, b, br);
            if must > 0 {
                let t = format!(
                    "“{}” is fixed to {}, which runs {} into “{}”: move the session or the break.",
                    s.title,
                    when(s),
                    span(u64::from(must)),
                    br.name
                );
                out.push(Reason::fixed_clash(t, ids.clone()));
            }
        }
        for u in p
            .unavailable
            .iter()
            .filter(|u| u.day == d && u.start < b && a < u.end)
        {
            if s.speakers.contains(&u.speaker) {
                let t = format!(
                    "“{}” is fixed to {}, but {} is unavailable {}–{}: move the session or ask another speaker.",
                    s.title,
                    when(s),
                    u.speaker,
                    clock(u.start),
                    clock(u.end)
                );
                out.push(Reason::fixed_clash(t, ids.clone()));
            }
        }
    }
    for (x, &i) in fixed.iter().enumerate() {
        for &j in &fixed[x + 1..] {
            out.extend(pair_clash(pr, i, j));
        }
    }
    out
}

fn pair_clash(pr: &Problem, i: usize, j: usize) -> Option<Reason> {
    let p = pr.p;
    let (s, u) = (&p.sessions[i], &p.sessions[j]);
    let (sd, sa, sb) = day_at(s);
    let (ud, ua, ub) = day_at(u);
    let ids = vec![s.id.clone(), u.id.clone()];
    let both = format!(
        "“{}” ({}) and “{}” ({})",
        s.title,
        when(s),
        u.title,
        when(u)
    );
    let order = |first: &Session, fd: u32, fb: u32, then: &Session, td: u32, ta: u32| {
        then.after.contains(&first.id) && (fd, fb) > (td, ta)
    };
    if order(s, sd, sb, u, ud, ua) || order(u, ud, ub, s, sd, sa) {
        let t = format!(
            "{both} are fixed in the wrong order for their 'after' link: move one of them."
        );
        return Some(Reason::fixed_clash(t, ids));
    }
    if sd != ud {
        return None;
    }
    if sa < ub && ua < sb && s.fixed_room.is_some() && s.fixed_room == u.fixed_room {
        let t = format!(
            "{both} are both fixed to the same room at overlapping times: move one of them."
        );
        return Some(Reason::fixed_clash(t, ids));
    }
    let co = p.changeover_minutes;
    let shared = pr.speakers[i].iter().find(|k| pr.speakers[j].contains(k));
    if let Some(&k) = shared
        && sa < ub + co
        && ua < sb + co
    {
        let t = format!(
            "{both} both need {}, with {} to change over between sessions: move one of them.",
            pr.speaker_names[k],
            span(u64::from(co))
        );
        return Some(Reason::fixed_clash(t, ids));
    }
    None
}
