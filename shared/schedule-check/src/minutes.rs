//! Minute bitmaps of one day: which minutes are marked.

/// Minutes in a day; anything at or past it is outside every day.
pub(crate) const DAY: usize = 1440;

#[derive(Debug, Clone)]
pub(crate) struct Minutes(Vec<bool>);

impl Minutes {
    pub(crate) fn none() -> Self {
        Minutes(vec![false; DAY])
    }

    pub(crate) fn mark(&mut self, from: u32, to: u32) {
        for m in from as usize..(to as usize).min(DAY) {
            self.0[m] = true;
        }
    }

    /// Whether every minute of `[from, to)` is marked.
    pub(crate) fn all(&self, from: u32, to: u32) -> bool {
        (to as usize) <= DAY && (from as usize..to as usize).all(|m| self.0[m])
    }

    /// Whether any minute of `[from, to)` is marked.
    pub(crate) fn any(&self, from: u32, to: u32) -> bool {
        (from as usize..(to as usize).min(DAY)).any(|m| self.0[m])
    }
}
