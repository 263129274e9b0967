//! One module per verb; each has `Args` (clap) and `run`.

pub mod order;
pub mod profile;
pub mod record;
pub mod verify;
