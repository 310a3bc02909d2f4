//! Packing moves for the local search. A pass places each session at its earliest start, so a
//! speaker whose talks must fill the stretches between fixed breaks exactly (90, then 60, then
//! 45 + 45 + 45 minutes) loses time when a short talk lands first in a long stretch: the long
//! talk no longer fits before the break and waits for the next one. These orders put one
//! speaker's (or one room's) sessions first in the pass, longest first (first-fit decreasing,
//! the usual bin-packing order), which fills each stretch with the longest talk that fits.

use crate::index::Problem;

/// Per person, the minutes of their sessions (with the changeover between them), most loaded
/// first, among people with at least two sessions; ties by index, so the order is fixed.
pub(crate) fn loaded_speakers(pr: &Problem) -> Vec<usize> {
    let co = pr.p.changeover_minutes;
    let mut load = vec![(0u32, 0u32); pr.speaker_names.len()];
    for (s, ks) in pr.speakers.iter().enumerate() {
        for &k in ks {
            load[k].0 += pr.p.sessions[s].duration + co;
            load[k].1 += 1;
        }
    }
    let mut out: Vec<usize> = (0..load.len()).filter(|&k| load[k].1 >= 2).collect();
    out.sort_by_key(|&k| (std::cmp::Reverse(load[k].0), k));
    out
}

/// `priority` with the sessions in `group` moved to the front of the order, longest first (ties
/// keep their relative order).
pub(crate) fn longest_first(priority: &[u64], group: &[usize], pr: &Problem) -> Vec<u64> {
    let mut out = priority.to_vec();
    let top = out.iter().copied().max().unwrap_or(0);
    let mut g = group.to_vec();
    g.sort_by_key(|&s| {
        (
            std::cmp::Reverse(pr.p.sessions[s].duration),
            std::cmp::Reverse(priority[s]),
            s,
        )
    });
    let len = g.len() as u64;
    for (rank, &s) in g.iter().enumerate() {
        out[s] = top + 1 + (len - rank as u64);
    }
    out
}

/// The sessions of speaker `k`.
pub(crate) fn sessions_of(pr: &Problem, k: usize) -> Vec<usize> {
    (0..pr.n())
        .filter(|&s| pr.speakers[s].contains(&k))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::build::{PassInput, pass};

    /// Coffee 10:30–10:45 and lunch 11:45–12:30 fixed; Ann's talks (45, 60, 45, 90, 45 minutes,
    /// 10 minutes apart) fill 09:00–10:30, 10:45–11:45 and 12:30–15:05 exactly, and only in
    /// that shape.
    fn ann() -> schedule_types::Program {
        let talk = |id: &str, minutes: u32| json!({"id": id, "title": id, "duration": minutes, "speakers": ["Ann"], "audience": 10});
        let fixed = |id: &str, start: u32, minutes: u32| json!({"id": id, "name": id, "day": 0, "earliest": start, "latest_end": start + minutes, "duration": minutes});
        serde_json::from_value(json!({
            "days": [{"start": 540, "end": 1080}],
            "rooms": [{"id": "r", "name": "R", "capacity": 10, "windows": [{"day": 0, "start": 540, "end": 1080}]}],
            "sessions": [talk("a1", 45), talk("a2", 60), talk("a3", 45), talk("a4", 90), talk("a5", 45)],
            "breaks": [fixed("coffee", 630, 15), fixed("lunch", 705, 45)],
            "changeover_minutes": 10
        }))
        .unwrap()
    }

    fn ann_ends(order: &[u64]) -> u32 {
        let p = ann();
        let pr = Problem::new(&p).unwrap();
        let input = PassInput {
            break_starts: &[630, 705],
            keep: &[None; 5],
            priority: order,
            spare: 0,
        };
        let st = pass(&pr, &input).unwrap();
        (0..5)
            .map(|s| st.at[s].unwrap().start + p.sessions[s].duration)
            .max()
            .unwrap()
    }

    #[test]
    fn longest_first_fills_the_stretches_between_breaks() {
        let p = ann();
        let pr = Problem::new(&p).unwrap();
        assert_eq!(loaded_speakers(&pr), vec![0]);
        let ann = sessions_of(&pr, 0);
        assert_eq!(ann, vec![0, 1, 2, 3, 4]);
        // Short talks first: the first stretch holds one 45-minute talk and wastes 45 minutes,
        // the 60- and 90-minute talks go after lunch, and Ann ends at 16:05.
        let short_first = [50, 10, 40, 0, 30];
        assert_eq!(ann_ends(&short_first), 965);
        let packed = longest_first(&short_first, &ann, &pr);
        assert!(packed[3] > packed[1] && packed[1] > packed[0].max(packed[2]).max(packed[4]));
        assert_eq!(
            ann_ends(&packed),
            905,
            "90 → coffee → 60 → lunch → 45 + 45 + 45"
        );
    }
}
