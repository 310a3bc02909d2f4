//! What stands in front of every model call of the local server: the cheap guards and the
//! budget (see the `budget` crate), assembled with the engine by `assembly`.

pub use assembly::GuardOptions;
