//! Improvement after construction: left-justify. Sessions are lifted one at a time, in order of
//! start, and put back at their earliest feasible slot; a slot freed early lets a later session
//! move into it. A session only ever moves earlier (its old slot is still free when it is put
//! back), so prerequisites and dependants stay in order. Fixed and kept sessions stay put.

use crate::state::{State, global};

/// Sweeps until nothing moves, at most `rounds` times.
pub(crate) fn left_justify(st: &mut State, movable: &[bool], rounds: u32) {
    let pr = st.pr;
    for _ in 0..rounds {
        let mut order: Vec<usize> = (0..pr.n()).filter(|&s| movable[s]).collect();
        order.sort_by_key(|&s| st.at[s].map(|a| (global(a.day, a.start), s)));
        let mut moved = false;
        for s in order {
            let Some(old) = st.at[s] else { continue };
            st.remove(s);
            let release = pr.preds[s]
                .iter()
                .filter_map(|&j| st.end(j))
                .max()
                .unwrap_or(0);
            let at = match st.earliest_before(s, release, 0, global(old.day, old.start)) {
                Some(at) => {
                    moved = true;
                    at
                }
                _ => old,
            };
            st.place(s, at);
        }
        if !moved {
            break;
        }
    }
}
